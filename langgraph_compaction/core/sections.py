"""The four sections every summary has, and reading one back from a summary's text.

A summary is ``## SESSION INTENT``, ``## SUMMARY``, ``## ARTIFACTS`` and
``## NEXT STEPS``. A model writes them loosely: more or fewer ``#``, bold, any
case, a colon with the section's first line after it (``Next steps: run the
tests``); ``canonical_sections`` reads all of these, and a text without a
SUMMARY header has its free text (before the first header, or all of it) read
as the SUMMARY section, so a model that ignores the format still has its
words kept. Both the summary's builder (``summary``) and what completes it
(``fidelity``) read sections through this module, so neither imports the
other for it. What a summary quotes (the user's requests in ``<request>``
blocks, the pinned constraints) is never read as one of its headers, whatever
lines it holds. Pure functions; nothing here imports langgraph.

>>> section("## SUMMARY\\nFixed the flush race.\\n\\n**NEXT STEPS**\\nRun the tests.", "NEXT STEPS")
'Run the tests.'
>>> section("## SESSION INTENT\\n<request>\\nSUMMARY of the incident: ...\\n</request>\\n## SUMMARY\\nOk.", "SUMMARY")
'Ok.'
>>> section("The user wants a CSV export.\\nNext steps: add the endpoint.", "SUMMARY")
'The user wants a CSV export.'
>>> section("The user wants a CSV export.\\nNext steps: add the endpoint.", "NEXT STEPS")
'add the endpoint.'
"""

from __future__ import annotations

import re

SECTIONS = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
#: A header as ``canonical_sections`` writes it: ``## NAME`` on a line of its own.
SECTION_HEADER = re.compile(rf"^## ({'|'.join(SECTIONS)})[ \t]*$", re.MULTILINE)
#: A header as a model writes it: ``#`` or a number before, bold, any case; after a colon, the section's first line.
_LOOSE_HEADER = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*|\d[.)][ \t]*)?(?:\*\*|__)?[ \t]*"
    r"(session[ _-]*intent|summary|artifacts?|next[ _-]*steps?)"
    r"[ \t]*(?:\*\*|__)?[ \t]*(:)?[ \t]*(?:\*\*|__)?[ \t]*(.*?)[ \t]*$",
    re.IGNORECASE,
)
#: How the pinned constraints' block opens; a pin's lines follow it as ``- `` lines, indented when it has several.
PINS_OPENER = "Pinned constraints"
#: What a summary quotes: a ``<request>`` block, and the pins' block (its header, its ``- `` and indented lines).
_QUOTED = re.compile(
    rf"<request>\n.*?\n</request>|^[ \t]*{PINS_OPENER}\b[^\n]*(?:\n(?:[ \t]*- |  )[^\n]*)*",
    re.DOTALL | re.MULTILINE,
)


def without_quotes(text: str) -> str:
    """Return the text with what it quotes masked (same length, same lines), so headers are found outside it."""
    # masked with a letter, not a space: a header's leading whitespace cannot reach across a quote
    return _QUOTED.sub(lambda m: re.sub(r"[^\n]", "x", m.group()), text)


def quote_lines(text: str) -> str:
    """Return a pin's text as the lines of its ``- `` entry: the lines after the first indented by two spaces."""
    return "\n  ".join(text.splitlines())


def _section_name(written: str) -> str:
    """Return the section a loosely written header names (``next_step`` -> ``NEXT STEPS``)."""
    word = re.sub(r"[ _-]+", "", written.upper()).rstrip("S")
    return next(name for name in SECTIONS if name.replace(" ", "").startswith(word))


def _headers_read(text: str) -> str:
    """Return the text with every loosely written header (outside quotes) as ``## NAME``, its inline line after."""
    out: list[str] = []
    for line, shown in zip(text.split("\n"), without_quotes(text).split("\n"), strict=True):
        match = _LOOSE_HEADER.match(shown)
        if match is None or (match.group(3) and not match.group(2)):  # "Summary of the incident" opens no section
            out.append(line)
            continue
        out.append(f"## {_section_name(match.group(1))}")
        if match.group(3):
            out.append(line[match.start(3) : match.end(3)])
    return "\n".join(out)


def canonical_sections(text: str) -> str:
    """Return a summary's text with its headers written ``## NAME``; free text is the SUMMARY when it has none.

    Without a SUMMARY header, what the text says before its first header (all
    of it when it has none) becomes the SUMMARY section: a model that ignores
    the format still has its words kept.

    >>> canonical_sections("**Session intent:** ship v2\\nWe fixed the flush race.")
    '## SESSION INTENT\\nship v2\\nWe fixed the flush race.'
    >>> canonical_sections("We fixed the flush race.\\n\\nNEXT STEPS\\nRun the tests.")
    '## SUMMARY\\nWe fixed the flush race.\\n\\n## NEXT STEPS\\nRun the tests.'
    """
    read = _headers_read(text)
    headers = list(SECTION_HEADER.finditer(without_quotes(read)))
    if any(h.group(1) == "SUMMARY" for h in headers):
        return read
    free = read[: headers[0].start()] if headers else read
    return f"## SUMMARY\n{read}" if free.strip() else read


def section(text: str, name: str) -> str:
    """Return the body of one section of a summary ('' when absent), read as ``canonical_sections`` reads it."""
    text = canonical_sections(text)
    headers = list(SECTION_HEADER.finditer(without_quotes(text)))
    for at, header in enumerate(headers):
        if header.group(1) == name:
            end = headers[at + 1].start() if at + 1 < len(headers) else len(text)
            return text[header.end() : end].strip()
    return ""


def summary_preamble(text: str) -> str:
    """Return what a summary says before its first section ('' when it opens with one or has none)."""
    text = canonical_sections(text)
    match = SECTION_HEADER.search(without_quotes(text))
    return text[: match.start()].strip() if match else ""

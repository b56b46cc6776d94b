"""The four sections every summary has, and reading one back from a summary's text.

A summary is ``## SESSION INTENT``, ``## SUMMARY``, ``## ARTIFACTS`` and
``## NEXT STEPS``; a model may write the headers with more or fewer ``#``, in
bold, or with a colon. Both the summary's builder (``summary``) and what
completes it (``fidelity``) read sections through this module, so neither
imports the other for it. What a summary quotes (the user's requests in
``<request>`` blocks, the pinned constraints) is never read as one of its
headers, whatever lines it holds. Pure functions; nothing here imports
langgraph.

>>> section("## SUMMARY\\nFixed the flush race.\\n\\n**NEXT STEPS**\\nRun the tests.", "NEXT STEPS")
'Run the tests.'
>>> section("## SESSION INTENT\\n<request>\\nSUMMARY of the incident: ...\\n</request>\\n## SUMMARY\\nOk.", "SUMMARY")
'Ok.'
"""

from __future__ import annotations

import re

SECTIONS = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
#: A line that opens one of the sections, however the model wrote its header.
SECTION_HEADER = re.compile(r"^\s*#{0,4}\s*\**\s*(SESSION INTENT|SUMMARY|ARTIFACTS|NEXT STEPS)\b", re.MULTILINE)
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


def section(text: str, name: str) -> str:
    """Return the body of one ``## NAME`` section of a summary ('' when absent); quoted text holds no header."""
    pattern = re.compile(
        rf"^\s*#{{0,4}}\s*\**\s*{re.escape(name)}\b\**:?\s*$(.*?)(?=^\s*#{{0,4}}\s*\**\s*(?:{'|'.join(SECTIONS)})\b|\Z)",
        re.MULTILINE | re.DOTALL,
    )
    match = pattern.search(without_quotes(text))
    return text[match.start(1) : match.end(1)].strip() if match else ""


def section_headers(text: str) -> set[str]:
    """Return the names of the sections a text has headers for (quoted text not counted)."""
    return {m.group(1) for m in SECTION_HEADER.finditer(without_quotes(text))}


def summary_preamble(text: str) -> str:
    """Return what a summary says before its first section ('' when it opens with one or has none)."""
    match = SECTION_HEADER.search(without_quotes(text))
    return text[: match.start()].strip() if match else ""

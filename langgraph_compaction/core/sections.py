"""The four sections every summary has, and reading one back from a summary's text.

A summary is ``## SESSION INTENT``, ``## SUMMARY``, ``## ARTIFACTS`` and
``## NEXT STEPS``; a model may write the headers with more or fewer ``#``, in
bold, or with a colon. Both the summary's builder (``summary``) and what
completes it (``fidelity``) read sections through this module, so neither
imports the other for it. Pure functions; nothing here imports langgraph.

>>> section("## SUMMARY\\nFixed the flush race.\\n\\n**NEXT STEPS**\\nRun the tests.", "NEXT STEPS")
'Run the tests.'
"""

from __future__ import annotations

import re

SECTIONS = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")
#: A line that opens one of the sections, however the model wrote its header.
SECTION_HEADER = re.compile(r"^\s*#{0,4}\s*\**\s*(SESSION INTENT|SUMMARY|ARTIFACTS|NEXT STEPS)\b", re.MULTILINE)


def section(text: str, name: str) -> str:
    """Return the body of one ``## NAME`` section of a summary ('' when absent)."""
    pattern = re.compile(
        rf"^\s*#{{0,4}}\s*\**\s*{re.escape(name)}\b\**:?\s*$(.*?)(?=^\s*#{{0,4}}\s*\**\s*(?:{'|'.join(SECTIONS)})\b|\Z)",
        re.MULTILINE | re.DOTALL,
    )
    match = pattern.search(text)
    return match.group(1).strip() if match else ""


def summary_preamble(text: str) -> str:
    """Return what a summary says before its first section ('' when it opens with one or has none)."""
    match = SECTION_HEADER.search(text)
    return text[: match.start()].strip() if match else ""

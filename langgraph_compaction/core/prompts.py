"""The two prompts: summary extraction and memory extraction, and how they are filled.

Each comes in two forms. The ``*_PROMPT`` form holds the conversation
rendered as text, for a summarizer that is not the agent's model. The
``*_INSTRUCTION`` form is sent as one message after the agent's own messages,
unchanged, so that a provider's prompt cache serves them (``{where}`` below
becomes "above"); the text is otherwise the same.

An application adds to a prompt (``CompactionConfig(summary={"instructions": ...},
memory={"instructions": ...})``, a ``compact(focus)``, a ``before_summary`` hook)
or replaces it whole (``summary.prompt`` / ``memory.prompt``); a
replacement must hold where the conversation goes, and the memory prompt its
``NO_REPLY`` answer (``summary_prompt_missing``, ``memory_prompt_missing``). Placeholders are filled by name only, so a
replacement may hold other braces (a JSON example) as they are, and in one
pass over the template alone: what fills them (the conversation, MEMORY.md)
and what is added to them (the instructions, the focus) is never read as a
template, whatever braces it holds.

A model answers them loosely. ``is_no_reply``, ``is_error_text``,
``refusal``, ``without_lead_in``, ``echoed_lines`` and ``before_loop`` say
what in an answer is no answer: ``NO_REPLY`` however it is wrapped, an error,
a refusal, the words around an answer, the prompt's own lines written back,
the loop a small model falls into after its useful text.
"""

import functools
import re
from collections.abc import Sequence

_SUMMARY = """<role>
Context Extraction Assistant
</role>

<primary_objective>
Your sole objective in this task is to extract the highest quality/most relevant context from the conversation history {where}.
</primary_objective>

<objective_information>
You're nearing the total number of input tokens you can accept, so you must extract the highest quality/most relevant pieces of information from your conversation history.
This context will then overwrite the conversation history presented {where}. Because of this, ensure the context you extract is only the most important information to your overall goal.
</objective_information>

<instructions>
The conversation history {where} will be replaced with the context you extract in this step.
You want to ensure that you don't repeat any actions you've already completed, so the context you extract from the conversation history should be focused on the most important information to your overall goal.
If the history starts with an earlier summary, merge it with the newer messages into one summary; keep what still matters from it.
Never copy secrets (API keys, tokens, passwords, private keys) into the summary; write [REDACTED] instead.

Structure your summary using these sections (populate each or write "None"):

## SESSION INTENT
What is the user's primary goal or request?

## SUMMARY
The most important context, decisions, reasoning, and rejected options.

## ARTIFACTS
Files or resources created, modified, or accessed (with specific paths and changes).

## NEXT STEPS
Specific tasks remaining to achieve the session intent.
</instructions>
{focus}
Carefully read through the entire conversation history {where} and extract the most important context. Respond ONLY with the extracted context."""

SUMMARY_PROMPT = _SUMMARY.replace("{where}", "below") + "\n\n<messages>\n{messages}\n</messages>"
#: Sent after the agent's messages; answer with text only, even with the agent's tools bound.
SUMMARY_INSTRUCTION = _SUMMARY.replace("{where}", "above").replace(
    "Respond ONLY with the extracted context.", "Do not call any tool. Respond ONLY with the extracted context."
)

FOCUS_INSTRUCTION = """
<focus>
The agent asked for this compaction with a focus. Preserve everything about it in detail: {focus}
</focus>
"""

#: The application's own instructions (``summary.instructions``, ``memory.instructions``, a hook's answer).
EXTRA_INSTRUCTIONS = """
<application_instructions>
{instructions}
</application_instructions>
"""

_MEMORY = """You are a memory extraction assistant. Analyze the conversation {where} and extract important facts, decisions, preferences, and contextual information that should be remembered for future conversations.

Output ONLY the extracted memories as a markdown bullet list. Each item should be a concise, self-contained fact. Include dates, names, and specifics when available.

If there is nothing worth remembering, respond with exactly: NO_REPLY

Guidelines:
- Extract user preferences, personal information, project decisions
- Capture important technical decisions and their rationale
- Note any commitments, deadlines, or action items
- Record relationship context (who works on what, team structure)
- Ignore routine greetings, tool invocations, and ephemeral status updates

IMPORTANT — write target and append-only rules:
- You are writing to TODAY'S daily memory ledger ({ledger_path}), NOT to MEMORY.md. The daily ledger is append-only — your output will be appended after the entries already shown below.
- MEMORY.md is the curated long-term memory and is shown ONLY as read-only context. Do NOT restate facts already covered by MEMORY.md or by today's earlier entries; a separate consolidation step periodically merges new daily entries into MEMORY.md.
- Keep each bullet point independent and self-contained so entries can be searched individually.
- Never record secrets (API keys, tokens, passwords, private keys).

Today's date: {today}
{scope}
<memory_md readonly="true">
{memory_md}
</memory_md>

<todays_ledger readonly="true">
{ledger}
</todays_ledger>"""

MEMORY_PROMPT = (
    _MEMORY.replace("{where}", "below").replace("{scope}", "") + "\n\n<conversation>\n{messages}\n</conversation>"
)
#: Sent after the agent's messages (shared with the summary request, so both read them from the cache).
MEMORY_INSTRUCTION = _MEMORY.replace("{where}", "above").replace(
    "{scope}",
    "Extract only from the messages after the last conversation summary (what the summary holds was extracted before). Do not call any tool.\n",
)

NO_REPLY = "NO_REPLY"

#: What a replacement prompt's conversation becomes when it is sent after the agent's own messages.
_ABOVE = "(the conversation above)"
_TOOLLESS = "Do not call any tool."
_PLACEHOLDER = re.compile(r"\{(messages|focus|ledger_path|today|memory_md|ledger)\}")


def fill(template: str, **values: str) -> str:
    """Return the template with its known ``{name}`` placeholders replaced; any other brace stays as written.

    One pass over the template: a value is never scanned for placeholders itself.

    >>> fill("Focus: {focus}", focus="the {messages} table")
    'Focus: the {messages} table'
    """
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def additions(focus: str | None = None, instructions: Sequence[str | None] = ()) -> str:
    """Return the blocks added to a prompt: the application's instructions, then the agent's focus."""
    extra = "\n\n".join(t.strip() for t in instructions if t and t.strip())
    return (EXTRA_INSTRUCTIONS.format(instructions=extra) if extra else "") + (
        FOCUS_INSTRUCTION.format(focus=focus) if focus else ""
    )


def _with_additions(filled: str, template: str, added: str) -> str:
    # a replacement without {focus} gets the additions at its end, after it is filled: they are text, not template
    return filled if "{focus}" in template or not added else filled + "\n" + added


def summary_request(
    rendered: str | None,
    *,
    prompt: str | None = None,
    focus: str | None = None,
    instructions: Sequence[str | None] = (),
) -> str:
    """Return the summary prompt for a rendered conversation, or the instruction sent after it (``rendered=None``).

    ``prompt`` replaces the built-in one (its ``{messages}`` becomes the
    conversation); ``instructions`` and ``focus`` are added either way.
    """
    added = additions(focus, instructions)
    if prompt is None:
        template = SUMMARY_PROMPT if rendered is not None else SUMMARY_INSTRUCTION
        return fill(template, messages=rendered or "", focus=added)
    if rendered is None:
        prompt = prompt.replace("{messages}", _ABOVE) + "\n" + _TOOLLESS
    return _with_additions(fill(prompt, messages=rendered or "", focus=added), prompt, added)


def memory_request(
    rendered: str | None, *, prompt: str | None = None, instructions: Sequence[str | None] = (), **values: str
) -> str:
    """Return the memory prompt for a rendered conversation, or the instruction sent after it (``rendered=None``).

    ``values`` fill ``{ledger_path}``, ``{today}``, ``{memory_md}`` and ``{ledger}``.
    """
    added = additions(None, instructions)
    if prompt is None:
        template = MEMORY_PROMPT if rendered is not None else MEMORY_INSTRUCTION
    else:
        template = prompt if rendered is not None else prompt.replace("{messages}", _ABOVE) + "\n" + _TOOLLESS
    return fill(template, messages=rendered or "", **values) + ("\n" + added if added else "")


def summary_prompt_missing(prompt: str) -> list[str]:
    """Return what a replacement summary prompt lacks: the ``{messages}`` placeholder (its sections are optional)."""
    return ["the {messages} placeholder (where the conversation goes)"] if "{messages}" not in prompt else []


def memory_prompt_missing(prompt: str) -> list[str]:
    """Return what a replacement memory prompt lacks: ``{messages}``, and the NO_REPLY answer for nothing to keep."""
    missing = ["the {messages} placeholder (where the conversation goes)"] if "{messages}" not in prompt else []
    return missing + (
        [f"the answer {NO_REPLY} (what the model writes when there is nothing to remember)"]
        if NO_REPLY not in prompt
        else []
    )


def is_no_reply(text: str) -> bool:
    """Return True for ``NO_REPLY`` however a model wraps it: any case, bold, backticks, quotes, a full stop.

    >>> [is_no_reply(t) for t in ("NO_REPLY", "**no_reply**", "`NO_REPLY`.", "No reply", "No replies yet")]
    [True, True, True, True, False]
    """
    return re.sub(r"[\W_]+", "", text).casefold() == NO_REPLY.replace("_", "").casefold()


_ERROR_TEXT = re.compile(
    r"^\s*(error\b|\(?summarization failed|exception\b|traceback \(most recent call last\)|internal server error)",
    re.IGNORECASE,
)


def is_error_text(text: str) -> bool:
    """Return True for an error passed off as an answer ("Error: rate limited", a traceback)."""
    return bool(_ERROR_TEXT.match(text))


#: How a model opens an answer that declines the task.
_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry\b|i apologi[sz]e|i (?:cannot|can ?not|can't|won't|am unable|'m unable)"
    r"|unfortunately,? i|as an ai\b)",
    re.IGNORECASE,
)


def refusal(text: str) -> str | None:
    """Return the opening of a text that declines the task ("I'm sorry, I can't ..."), else None."""
    stripped = text.strip()
    return stripped.splitlines()[0][:80] if _REFUSAL.match(stripped) else None


#: The words a model puts around its answer ("Sure! Here is the summary:", "I hope this helps!"), saying nothing.
_LEAD_IN = re.compile(
    r"^\W*(?:(?:sure|okay|ok|certainly|of course|absolutely|great|done)\b"
    r"|(?:here(?:'s| is| are| you go)|below is|i hope this helps|let me know|feel free)[^.!:\n]*)[\s!.:,]*",
    re.IGNORECASE,
)


def without_lead_in(text: str) -> str:
    """Return a text without the words a model puts before or around an answer ('' when that is all it says).

    >>> without_lead_in("Sure! Here are the memories: - Tabs")
    '- Tabs'
    """
    while (lead := _LEAD_IN.match(text)) and lead.end():
        text = text[lead.end() :]
    return text


def _line_key(line: str) -> str:
    """Return a line folded for comparison: no markdown marks, no punctuation at its ends, one space, any case."""
    line = re.sub(r"^[\s>#*_`-]*(?:\d+[.)]\s*)?|[\s*_`]*$", "", line)
    return re.sub(r"\s+", " ", line).strip(" .:;,!?\"'").casefold()


def text_lines(text: str) -> list[str]:
    """Return the lines of a text worth comparing: folded (``_line_key``), at least three words."""
    return [key for line in text.splitlines() if len((key := _line_key(line)).split()) >= 3]


def echoed_lines(text: str, source: str) -> list[str]:
    """Return the lines of ``text`` (folded, three words or more) that are lines of ``source``: what it wrote back.

    >>> echoed_lines("- Capture important technical decisions and their rationale\\n- Tabs", MEMORY_PROMPT)
    ['capture important technical decisions and their rationale']
    """
    known = set(text_lines(source))
    return [line for line in text_lines(text) if line in known]


def without_echoes(text: str, source: str) -> str:
    """Return ``text`` without its lines that ``echoed_lines`` finds in ``source``: what is left is the writer's own.

    >>> without_echoes("## SUMMARY\\nWhat is the user's primary goal or request?\\nThe port is 8080.", SUMMARY_PROMPT)
    '## SUMMARY\\nThe port is 8080.'
    """
    known = set(text_lines(source))
    return "\n".join(line for line in text.splitlines() if _line_key(line) not in known)


#: The same words written three times or more in a row: a phrase (two words or more) a model loops on.
_PHRASE_LOOP = re.compile(r"(.{8,300}?)\1{2,}", re.DOTALL)
#: One sentence or line of an answer (with its list number): up to a line's end or a ".", "!" or "?" and a space.
_UNIT = re.compile(r"(?:^[ \t]*\d+[.)][ \t]+)?(?:[^\n.!?]|[.!?](?!\s))+[.!?]*", re.MULTILINE)


def _phrase_loop_start(text: str) -> int | None:
    """Return where a phrase said three times in a row to the text's end is said the second time (None: none is).

    Only a run that lasts to the end (but for a last copy cut short) is a
    loop: words said again and again in a quote, then more text, are not. A
    phrase over lines ends where its first copy's last line ends.
    """
    for match in _PHRASE_LOOP.finditer(text):
        phrase = match.group(1)
        at_end = len(text[match.end() :].strip()) < len(phrase)
        if at_end and len(re.findall(r"[^\W\d_]{2,}", phrase)) >= 2:  # words, not a rule of dashes or a table
            cut = match.start() + len(phrase)
            if "\n" in phrase and text[cut - 1] != "\n":
                cut = text.find("\n", cut) % (len(text) + 1)
            return cut
    return None


def _repeated_unit_start(text: str) -> int | None:
    """Return where an answer's sentences start coming back (None when they do not).

    The loop starts at the first sentence (three words or more, folded as
    ``_line_key`` folds it) said before, when at least half the sentences
    from there on were said before too: one sentence said twice is no loop.
    """
    units = [(m.start(), key) for m in _UNIT.finditer(text) if len((key := _line_key(m.group())).split()) >= 3]
    seen: set[str] = set()
    for at, (start, key) in enumerate(units):
        if key in seen:
            rest = units[at:]
            again, known = 0, set(seen)
            for _, later in rest:
                again += later in known
                known.add(later)
            if again >= 2 and 2 * again >= len(rest):
                return start
        seen.add(key)
    return None


@functools.lru_cache(maxsize=64)  # a summary is checked when it is made and again when it is kept
def before_loop(text: str) -> str:
    """Return what a text says before it starts repeating itself (all of it when it does not).

    >>> before_loop("The port is 8080. The host is local. The host is local. The host is local.")
    'The port is 8080. The host is local.'
    >>> before_loop("Port 8080 found. Next I will read the file, read the file, read the file, read the file")
    'Port 8080 found. Next I will read the file'
    """
    starts = [at for at in (_phrase_loop_start(text), _repeated_unit_start(text)) if at is not None]
    if not starts:
        return text
    cut = min(starts)
    cut += len(text[cut:]) - len(text[cut:].lstrip(".!?"))  # the full stop that ends the last sentence kept
    return text[:cut].rstrip().rstrip(",;:").rstrip()

"""The two prompts of the design: summary extraction and memory extraction."""

SUMMARY_PROMPT = """<role>
Context Extraction Assistant
</role>

<primary_objective>
Your sole objective in this task is to extract the highest quality/most relevant context from the conversation history below.
</primary_objective>

<objective_information>
You're nearing the total number of input tokens you can accept, so you must extract the highest quality/most relevant pieces of information from your conversation history.
This context will then overwrite the conversation history presented below. Because of this, ensure the context you extract is only the most important information to your overall goal.
</objective_information>

<instructions>
The conversation history below will be replaced with the context you extract in this step.
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
Carefully read through the entire conversation history below and extract the most important context. Respond ONLY with the extracted context.

<messages>
{messages}
</messages>"""

FOCUS_INSTRUCTION = """
<focus>
The agent asked for this compaction with a focus. Preserve everything about it in detail: {focus}
</focus>
"""

MEMORY_PROMPT = """You are a memory extraction assistant. Analyze the conversation below and extract important facts, decisions, preferences, and contextual information that should be remembered for future conversations.

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

<memory_md readonly="true">
{memory_md}
</memory_md>

<todays_ledger readonly="true">
{ledger}
</todays_ledger>

<conversation>
{messages}
</conversation>"""

NO_REPLY = "NO_REPLY"

"""Flush: long-term memory extracted once per message into the daily ledger; and the redactor."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.sqlite import SqliteStore
from support import SMALL_WINDOW, ScriptedAgent, agent_builder, build_graph, first_input

from langgraph_compaction import CompactionConfig, StoreStorage, add_compaction
from langgraph_compaction.core.conversation import SUMMARY_MESSAGE_NAME
from langgraph_compaction.core.redact import REDACTED, redact_record, redact_secrets
from langgraph_compaction.memory.ledger import (
    content_key,
    flush_marker,
    flushed_keys,
    ledger_entry,
    memory_lines,
    normalize_bullet,
    parse_bullets,
    search_terms,
)
from langgraph_compaction.storage import safe_label
from langgraph_compaction.testing import ScriptedModel

THREAD = {"configurable": {"thread_id": "thread-1"}}
FLUSH_HEADER = re.compile(r"^## Flush \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$", re.MULTILINE)


def _memory_prompts(model):
    return [c.split("<conversation>", 1)[1] for c in model.calls if "memory extraction assistant" in c]


def _run(graph, turns, config=THREAD):
    for turn in range(turns):
        graph.invoke(first_input(turn), config)
    return graph.get_state(config).values


def _today(zone="UTC"):
    return datetime.now(ZoneInfo(zone)).date().isoformat()


def test_second_flush_prompt_has_neither_the_first_summary_nor_flushed_messages(tmp_path):
    model = ScriptedModel()
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run(graph, 8)
    assert state["compaction"]["counts"]["summarize"] >= 2
    first, second = _memory_prompts(model)[:2]
    assert "Task 0 please fix module0" in first
    assert '[tool call bash id=call-0-bash] {"cmd": "pytest -q module0"}' in first  # tool names and arguments
    assert "[summary of earlier conversation]" not in second and "## SESSION INTENT" not in second
    assert "Task 0 please fix module0" not in second and "call-0-bash" not in second
    ids_first = set(re.findall(r"id=(call-[\w-]+)", first))
    assert ids_first.isdisjoint(re.findall(r"id=(call-[\w-]+)", second))


def test_ledger_entries_have_the_flush_header_and_no_repeated_bullet(tmp_path):
    answer = "- The user wants every module fixed and tested\n- Tests run with pytest -q\n"
    model = ScriptedModel(memory=answer)
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    _run(graph, 8)
    ledger = (tmp_path / "memory" / f"{_today()}.md").read_text()
    assert len(_memory_prompts(model)) >= 2
    assert len(FLUSH_HEADER.findall(ledger)) == 1  # later flushes found nothing new to write
    assert parse_bullets(ledger) == ["The user wants every module fixed and tested", "Tests run with pytest -q"]
    assert "Today's ledger" not in ledger and "<!-- flush:" in ledger  # the hidden marker only


def test_no_reply_writes_nothing(tmp_path):
    model = ScriptedModel(memory="NO_REPLY")
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run(graph, 6)
    assert len(_memory_prompts(model)) == state["compaction"]["counts"]["summarize"] >= 2
    assert not (tmp_path / "memory").exists() and not (tmp_path / "MEMORY.md").exists()
    flush_events = [e for e in state["compaction"]["events"] if e["stage"] == "flush"]
    assert flush_events and all(e["memories"] == 0 for e in flush_events)


@pytest.mark.parametrize("memory", ["NO_REPLY", None], ids=["no-reply", "bullets"])
def test_flush_cursor_skips_extracted_messages_when_the_summary_failed(tmp_path, memory):
    # the summary fails and the history is kept: the next compaction evicts the same messages again
    config = CompactionConfig(context_window=60_000, trigger_tokens=8_000, keep_tokens=2_000)
    model = ScriptedModel(summary=RuntimeError("summarizer down"), memory=memory)
    graph, _ = build_graph(model, config=config, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run(graph, 4)
    assert state["compaction"]["counts"]["failed"] >= 2
    prompts = _memory_prompts(model)
    assert len(prompts) >= 2 and "Task 0 please fix module0" in prompts[0]
    for later in prompts[1:]:
        assert "Task 0 please fix module0" not in later and "call-0-bash" not in later


def test_flush_shows_memory_md_and_todays_ledger_read_only(tmp_path):
    (tmp_path / "MEMORY.md").write_text("- The user's name is Ada\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / f"{_today()}.md").write_text("## Flush 2026-01-01T00:00:00+00:00\n\n- Earlier fact\n")
    model = ScriptedModel()
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    _run(graph, 4)
    prompt = next(c for c in model.calls if "memory extraction assistant" in c)
    assert '<memory_md readonly="true">\n- The user\'s name is Ada\n</memory_md>' in prompt
    assert "- Earlier fact" in prompt.split('<todays_ledger readonly="true">')[1].split("</todays_ledger>")[0]
    assert f"memory/{_today()}.md" in prompt and "Do NOT restate facts" in prompt


def test_ledger_day_is_in_the_configured_time_zone(tmp_path):
    zone = "Pacific/Kiritimati"  # UTC+14: a different day than UTC for 14 hours of every day
    config = CompactionConfig(context_window=30_000, memory={"timezone": zone})
    graph, _ = build_graph(ScriptedModel(), config=config, storage=tmp_path, checkpointer=InMemorySaver())
    _run(graph, 4)
    ledger = (tmp_path / "memory" / f"{_today(zone)}.md").read_text()
    assert FLUSH_HEADER.search(ledger).group(0).endswith("+14:00")


def test_flush_redacts_secrets_before_the_ledger(tmp_path):
    key = "sk-proj-" + "Zx9" * 10
    model = ScriptedModel(memory=f"- The deploy key is {key}\n- Database at postgres://app:hunter2@db/main\n")
    graph, _ = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    _run(graph, 4)
    ledger = (tmp_path / "memory" / f"{_today()}.md").read_text()
    assert key not in ledger and "hunter2" not in ledger
    assert "- The deploy key is [REDACTED]" in ledger and "postgres://app:[REDACTED]@db/main" in ledger


def test_a_custom_redactor_replaces_the_default(tmp_path):
    config = CompactionConfig(context_window=30_000, guards={"redactor": lambda text: text.replace("Ada", "[name]")})
    graph, _ = build_graph(
        ScriptedModel(memory="- Ada prefers tabs\n"), config=config, storage=tmp_path, checkpointer=InMemorySaver()
    )
    _run(graph, 4)
    assert "- [name] prefers tabs" in (tmp_path / "memory" / f"{_today()}.md").read_text()


@pytest.mark.parametrize("failure", ["model-error", "disk-error"])
def test_flush_failure_is_an_event_and_never_blocks_summarization(tmp_path, failure):
    model = ScriptedModel(memory=RuntimeError("flush model down") if failure == "model-error" else None)
    if failure == "disk-error":
        (tmp_path / "memory").write_text("a file where the ledger folder should be")
    graph, agent = build_graph(model, config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    state = _run(graph, 5)
    assert agent.problems == []
    assert state["messages"][1].name == SUMMARY_MESSAGE_NAME
    errors = [e["error"] for e in state["compaction"]["events"] if e["stage"] == "flush" and e.get("error")]
    assert errors and ("flush model down" in errors[0] or "NotADirectoryError" in errors[0])
    assert state["compaction"]["flushed_ids"] == []  # nothing counts as extracted


def test_a_separate_cheaper_flush_model_is_used_and_not_streamed(tmp_path):
    summarizer, flusher = ScriptedModel(), ScriptedModel()
    builder = agent_builder(ScriptedAgent())
    add_compaction(
        builder, before="agent", model=summarizer, flush_model=flusher, config=SMALL_WINDOW, storage=tmp_path
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    streamed = []
    for turn in range(4):
        for chunk, _ in graph.stream(first_input(turn), THREAD, stream_mode="messages"):
            streamed.append(chunk.content if isinstance(chunk.content, str) else "")
    assert _memory_prompts(flusher) and not _memory_prompts(summarizer)
    assert not any("The user asked:" in text for text in streamed)


@dataclass
class UserContext:
    user_id: str


@pytest.mark.parametrize("how", ["context", "configurable"])
def test_store_memory_lives_in_a_per_user_namespace(tmp_path, how):
    with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as store:
        store.setup()
        builder = agent_builder(ScriptedAgent(), context_schema=UserContext)
        add_compaction(builder, before="agent", model=ScriptedModel(), config=SMALL_WINDOW)
        graph = builder.compile(checkpointer=InMemorySaver(), store=store)
        user = "ada.lovelace@example.com"
        for turn in range(4):
            if how == "context":
                graph.invoke(first_input(turn), THREAD, context=UserContext(user_id=user))
            else:
                graph.invoke(
                    first_input(turn),
                    {"configurable": {"thread_id": "thread-1", "user_id": user}},
                    context=UserContext(user_id=""),
                )
        namespace = ("compaction", "memory", safe_label(user))
        items = store.search(namespace)  # the ledger's bullets are items of their own, keyed by the bullet
        assert items and all(it.namespace[:3] == namespace and "." not in "".join(it.namespace) for it in items)
        text = StoreStorage(store).read_memory_file(user, f"memory/{_today()}.md")
        assert "- The user asked: Task 0" in text and text.startswith("## Flush ")
        assert store.search(("compaction", "memory", "default")) == []


def test_ledger_entry_and_marker_are_pure_and_deterministic():
    now = datetime(2026, 11, 29, 10, 15, tzinfo=UTC)
    said = [HumanMessage("Deploy on Fridays.", id="a"), AIMessage("Noted.", id="b")]
    marker = flush_marker(said, "t")
    entry = ledger_entry("- Fact one.\n* fact ONE\n- Fact two\nnot a bullet", "", now, marker=marker)
    assert (
        entry == f"## Flush 2026-11-29T10:15:00+00:00\n{flush_marker(said[::-1], 't')}\n\n- Fact one.\n- Fact two\n\n"
    )
    assert ledger_entry("- fact one", entry, now) is None
    assert ledger_entry("NO_REPLY", "", now) is None and ledger_entry("  NO_REPLY\n", "", now) is None
    appended = ledger_entry("- Fact three", "x", now)
    assert appended.startswith("\n\n## Flush")
    lines = memory_lines("memory/2026-11-29.md", entry + "## Flush 2026-11-29T11:00:00+00:00\n\n- Fact three\n")
    assert [(x.line, x.text, x.date) for x in lines] == [
        (4, "Fact one.", "2026-11-29T10:15:00+00:00"),
        (5, "Fact two", "2026-11-29T10:15:00+00:00"),
        (9, "Fact three", "2026-11-29T11:00:00+00:00"),
    ]
    assert normalize_bullet("  The  user PREFERS tabs. ") == "the user prefers tabs"
    assert search_terms("read_file 读取文件") == ["read", "file", "读", "取", "文", "件", "读取", "取文", "文件"]


# --- the redactor -------------------------------------------------------------

SECRETS = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t",
    "openai-legacy": "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0U1v2W3x4",
    "anthropic": "sk-ant-api03-" + "x7Y" * 12,
    "aws-access-key": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2c3D4e5" * 4,
    "github-fine-grained": "github_pat_11ABCDEFG0" + "x9" * 20,
    "slack": "xoxb-1234567890-abcdefghij",
    "google": "AIza" + "S" * 35,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_redactor_removes_known_token_shapes(name):
    secret = SECRETS[name]
    text = f"step 3: used {secret} to call the API"
    assert redact_secrets(text) == f"step 3: used {REDACTED} to call the API"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Authorization: Bearer abc123def456ghi789", "Authorization: Bearer [REDACTED]"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "curl -H 'Authorization: Basic [REDACTED]'"),
        ("token=Bearer 9f8e7d6c5b4a39281706", "token=Bearer [REDACTED]"),
        ("postgres://app:hunter2@db:5432/main", "postgres://app:[REDACTED]@db:5432/main"),
        ("https://bob:s3cr%40t@example.com/x", "https://bob:[REDACTED]@example.com/x"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]"),
        ('{"password": "hunter2", "user": "bob"}', '{"password": "[REDACTED]", "user": "bob"}'),
        ("DB_PASSWORD=x", "DB_PASSWORD=[REDACTED]"),
        ("export GITHUB_TOKEN=abcdef1234567890", "export GITHUB_TOKEN=[REDACTED]"),
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\ndone",
            "key:\n[REDACTED]\ndone",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE (output cut)", "[REDACTED]"),
    ],
)
def test_redactor_keeps_the_label_and_removes_the_credential(text, expected):
    assert redact_secrets(text) == expected
    assert redact_secrets(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=4000 and tokens: 5000, token: 12",
        "the bearer of bad news; Basic understanding of tokens",
        "PWD=/home/user/project",
        "https://example.com/path:with@colon and user@example.com",
        "sha256 0123456789abcdef0123456789abcdef, skip-tests, sk-short",
        "The user prefers tabs over spaces (2026-11-29).",
    ],
)
def test_redactor_leaves_ordinary_text_alone(text):
    assert redact_secrets(text) == text


def test_redact_record_keeps_ids_names_and_call_pairing():
    secret = SECRETS["github"]
    record = {
        "type": "ai",
        "data": {
            "id": "a1",
            "content": [{"type": "text", "text": f"using {secret}"}],
            "tool_calls": [{"name": "bash", "args": {"cmd": f"gh auth login --with-token {secret}"}, "id": "c1"}],
            "additional_kwargs": {"tool_calls": [{"id": "c1", "function": {"arguments": f'{{"cmd": "{secret}"}}'}}]},
        },
    }
    cleaned = redact_record(record, redact_secrets)
    assert secret not in str(cleaned)
    assert cleaned["data"]["id"] == "a1" and cleaned["data"]["tool_calls"][0]["id"] == "c1"
    assert cleaned["data"]["content"][0] == {"type": "text", "text": "using [REDACTED]"}
    assert record["data"]["content"][0]["text"] == f"using {secret}"  # the input is not modified


def test_redact_record_looks_inside_tuples_and_sets_of_an_artifact_and_keeps_their_types():
    secret = SECRETS["github"]
    record = {
        "type": "tool",
        "data": {
            "id": "t1",
            "tool_call_id": "c1",
            "content": "ok",
            "artifact": {"argv": ("gh", secret), "tokens": {secret}, "frozen": frozenset({secret})},
        },
    }
    cleaned = redact_record(record, redact_secrets)["data"]["artifact"]
    assert secret not in str(cleaned)
    assert (
        cleaned["argv"] == ("gh", REDACTED)
        and cleaned["tokens"] == {REDACTED}
        and cleaned["frozen"] == frozenset({REDACTED})
    )


@pytest.mark.parametrize(
    "text,expected",
    [
        ("the staging db password is hunter2-staging", "the staging db password is [REDACTED]"),
        ("FYI the api key is 9f8e7d6c5b4a…", "FYI the api key is [REDACTED]"),
        ("My password for the VPN is Tr0ub4dor&3.", "My password for the VPN is [REDACTED]."),
        ("the access token was 'a1b2c3d4e5f6' yesterday", "the access token was '[REDACTED]' yesterday"),
        ("Pay it to IBAN DE89 3704 0044 0532 0130 00 today", "Pay it to IBAN [REDACTED] today"),
        ("iban: GB82WEST12345698765432", "iban: [REDACTED]"),
        ("refund FR1420041010050500013M02606 please", "refund [REDACTED] please"),
    ],
)
def test_redactor_catches_secrets_said_in_plain_words(text, expected):
    assert redact_secrets(text) == expected
    assert redact_secrets(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "the password is required and the token is expired",
        "the token is 5 characters long; the pin is 1234",
        "the secret is out: the api key is rotated weekly",
        "ticket DE12345678901234567890 is closed",  # the shape of an IBAN, not its checksum
        "order GB00WEST12345698765432 shipped",
    ],
)
def test_plain_words_about_secrets_are_not_secrets(text):
    assert redact_secrets(text) == text


def test_a_password_said_in_the_conversation_never_reaches_the_ledger(tmp_path):
    graph, _ = build_graph(ScriptedModel(), config=SMALL_WINDOW, storage=tmp_path, checkpointer=InMemorySaver())
    said = HumanMessage("Task 0 please deploy: the staging db password is hunter2-staging, IBAN DE89370400440532013000")
    graph.invoke({"messages": [said]}, THREAD)
    for turn in range(1, 6):
        graph.invoke(first_input(turn), THREAD)
    ledger = (tmp_path / "memory" / f"{_today()}.md").read_text()
    assert "the staging db password is [REDACTED]" in ledger
    assert "hunter2" not in ledger and "DE89" not in ledger


def test_a_flush_marker_names_its_messages_by_what_they_say_in_their_thread():
    said = HumanMessage("Deploy on Fridays.", id="h-1")
    again = HumanMessage("Deploy on Fridays.", id="h-1-retried")  # the same request sent again, under a new id
    marker = flush_marker([said, AIMessage("Noted.", id="a-1")], "t")
    assert content_key(again, "t") in flushed_keys(f"## Flush x\n{marker}\n\n- fact\n")
    assert content_key(again, "other thread") not in flushed_keys(marker)  # another thread keeps its own memories
    assert content_key(HumanMessage("Deploy on Mondays."), "t") not in flushed_keys(marker)

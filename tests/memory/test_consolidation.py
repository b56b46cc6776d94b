"""Consolidation: new ledger entries merged into MEMORY.md with a backup, a loss guard and a rate limit."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langgraph_compaction import CompactionState, FileStorage, consolidation_node
from langgraph_compaction.cli.consolidate import consolidate_main
from langgraph_compaction.core.tokens import estimate_text_tokens
from langgraph_compaction.fronts.tools import make_compaction_tools
from langgraph_compaction.memory.consolidation import STATE_FILE, consolidate_memory, memory_for_prompt
from langgraph_compaction.memory.ledger import dropped_entries, parse_answer, parse_bullets
from langgraph_compaction.storage import StoreStorage
from langgraph_compaction.testing import ScriptedModel

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
OLD_MEMORY = "# Memory\n\n- The user's name is Ada\n- The project uses Postgres 16\n- Deploys go to staging first\n- The user prefers tabs\n"


def _section(prompt, tag):
    return prompt.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0]


def merge_answer(prompt):
    """A careful consolidator: every old bullet, then the new ones not already there."""
    old = parse_bullets(_section(prompt, "memory_md"))
    new = [b for b in parse_bullets(_section(prompt, "new_entries")) if b not in old]
    return "<memory>\n# Memory\n\n" + "".join(f"- {b}\n" for b in old + new) + "</memory>"


def _ledger(day, *bullets, at="10:00:00"):
    return (
        f"## Flush {day}T{at}+00:00\n<!-- flush:0123456789abcdef -->\n\n" + "".join(f"- {b}\n" for b in bullets) + "\n"
    )


@pytest.fixture
def memory_dir(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text(OLD_MEMORY)
    (tmp_path / "memory" / "2026-11-29.md").write_text(
        _ledger("2026-11-29", "The user moved the deadline to 2026-12-15")
    )
    return tmp_path


def _consolidation_prompts(model):
    return [c for c in model.calls if "memory consolidation assistant" in c]


def test_new_entries_are_merged_with_a_backup_and_a_watermark(memory_dir):
    model = ScriptedModel(reply=merge_answer)
    result = consolidate_memory(memory_dir, model, now=NOW)
    assert result.status == "consolidated" and result.changed
    memory = (memory_dir / "MEMORY.md").read_text()
    assert parse_bullets(memory) == parse_bullets(OLD_MEMORY) + ["The user moved the deadline to 2026-12-15"]
    backups = list((memory_dir / "memory" / "backups").iterdir())
    assert [b.name for b in backups] == ["MEMORY-2026-11-29T12-00-00Z.md"]
    assert backups[0].read_text() == OLD_MEMORY and result.backup_path == str(backups[0])
    assert (result.entries_before, result.entries_after) == (4, 5)

    # a second worker within 30 minutes is turned away; the state is in the storage, not in the process
    again = consolidate_memory(str(memory_dir), model, now=NOW + timedelta(minutes=10))
    assert again.status == "rate_limited" and again.next_run_after == "2026-11-29T12:30:00+00:00"

    # later, only what was appended since the watermark is sent
    with open(memory_dir / "memory" / "2026-11-29.md", "a") as fh:
        fh.write(_ledger("2026-11-29", "The staging database is db-staging-2", at="13:00:00"))
    later = consolidate_memory(memory_dir, model, now=NOW + timedelta(hours=1))
    assert later.status == "consolidated"
    entries = _section(_consolidation_prompts(model)[-1], "new_entries")
    assert "db-staging-2" in entries and "deadline" not in entries
    assert len(list((memory_dir / "memory" / "backups").iterdir())) == 2

    # nothing new: no model call at all
    calls = len(model.calls)
    quiet = consolidate_memory(memory_dir, model, now=NOW + timedelta(hours=2))
    assert quiet.status == "unchanged" and len(model.calls) == calls
    state = json.loads((memory_dir / STATE_FILE).read_text())
    assert state["last_run"] == "2026-11-29T14:00:00+00:00" and "memory/2026-11-29.md" in state["watermark"]


def test_output_that_drops_most_entries_is_refused_and_changes_nothing(memory_dir):
    model = ScriptedModel(reply="<memory>\n- The user moved the deadline to 2026-12-15\n</memory>")
    result = consolidate_memory(memory_dir, model, now=NOW)
    assert result.status == "refused" and "drops 4 of 4 entries" in result.reason
    assert set(result.dropped) == set(parse_bullets(OLD_MEMORY))
    assert (memory_dir / "MEMORY.md").read_text() == OLD_MEMORY
    assert not (memory_dir / "memory" / "backups").exists()
    # the watermark did not move: the next run (after the gap) sends the same entries again
    retry = ScriptedModel(reply=merge_answer)
    assert consolidate_memory(memory_dir, retry, now=NOW + timedelta(hours=1)).status == "consolidated"
    assert "deadline" in _section(_consolidation_prompts(retry)[0], "new_entries")


def test_dropping_entries_named_as_superseded_is_allowed(memory_dir):
    answer = (
        "<memory>\n- The user's name is Ada Lovelace\n- The project moved to Postgres 17 on 2026-11-29\n"
        "- The deadline is 2026-12-15\n</memory>\n<superseded>\n"
        "- The project uses Postgres 16 => upgraded to 17\n- Deploys go to staging first => staging was retired\n"
        "- The user prefers tabs => the user now uses spaces\n</superseded>"
    )
    result = consolidate_memory(memory_dir, ScriptedModel(reply=answer), now=NOW)
    assert result.status == "consolidated", result.reason
    assert "Postgres 17" in (memory_dir / "MEMORY.md").read_text()
    assert result.dropped == ()  # the name bullet was merged, the rest superseded


@pytest.mark.parametrize(
    "reply",
    ["", "   ", "NO_REPLY", "<memory>\n- cut off mid-answer", "I could not do that.", RuntimeError("model down")],
    ids=["empty", "blank", "no-reply", "truncated", "no-bullets", "raises"],
)
def test_empty_or_failed_output_changes_nothing(memory_dir, reply):
    model = ScriptedModel(reply=reply)
    before = sorted(p.relative_to(memory_dir) for p in memory_dir.rglob("*") if p.name != "consolidation.json")
    result = consolidate_memory(memory_dir, model, now=NOW)
    assert result.status in ("refused", "failed") and not result.changed
    assert (memory_dir / "MEMORY.md").read_text() == OLD_MEMORY
    assert sorted(p.relative_to(memory_dir) for p in memory_dir.rglob("*") if p.name != "consolidation.json") == before


def test_too_long_output_is_asked_again_shorter_then_refused(memory_dir):
    long_answer = (
        "<memory>\n"
        + "".join(f"- Fact number {i} about the deployment pipeline and its owners\n" for i in range(400))
        + "</memory>"
    )
    model = ScriptedModel(reply=long_answer)
    result = consolidate_memory(memory_dir, model, max_tokens=500, now=NOW)
    assert result.status == "refused" and "over max_tokens=500" in result.reason
    prompts = _consolidation_prompts(model)
    assert len(prompts) == 2 and "over the limit of 500" in prompts[1]
    assert (memory_dir / "MEMORY.md").read_text() == OLD_MEMORY

    replies = iter([lambda prompt: long_answer, merge_answer])
    shorter = ScriptedModel(reply=lambda prompt: next(replies)(prompt))
    result = consolidate_memory(memory_dir, shorter, max_tokens=500, now=NOW + timedelta(hours=1))
    assert result.status == "consolidated" and result.tokens <= 500


def test_consolidated_memory_is_redacted(memory_dir):
    key = "AKIAIOSFODNN7EXAMPLE"
    answer = f"<memory>\n{OLD_MEMORY}- The CI uses the AWS key {key}\n</memory>"
    assert consolidate_memory(memory_dir, ScriptedModel(reply=answer), now=NOW).changed
    memory = (memory_dir / "MEMORY.md").read_text()
    assert key not in memory and "- The CI uses the AWS key [REDACTED]" in memory


def test_daily_files_past_retention_move_to_the_archive_and_stay_searchable(tmp_path):
    (tmp_path / "memory").mkdir()
    old_day = (NOW - timedelta(days=120)).date().isoformat()
    recent_day = (NOW - timedelta(days=3)).date().isoformat()
    (tmp_path / "memory" / f"{old_day}.md").write_text(_ledger(old_day, "The user adopted trunk-based development"))
    (tmp_path / "memory" / f"{recent_day}.md").write_text(_ledger(recent_day, "The user likes short standups"))
    result = consolidate_memory(tmp_path, ScriptedModel(reply=merge_answer), now=NOW)
    assert result.status == "consolidated"
    assert result.archived_files == (f"memory/{old_day}.md",)
    assert not (tmp_path / "memory" / f"{old_day}.md").exists()
    assert (
        (tmp_path / "memory" / "archive" / f"{old_day}.md")
        .read_text()
        .endswith("- The user adopted trunk-based development\n\n")
    )
    assert (tmp_path / "memory" / f"{recent_day}.md").exists()
    # archived entries are not merged a second time, and memory_search still finds them
    assert (
        consolidate_memory(tmp_path, ScriptedModel(reply=merge_answer), now=NOW + timedelta(hours=1)).status
        == "unchanged"
    )
    answer = FileStorage(tmp_path)
    from langgraph_compaction.fronts.tools import search_memory

    hits = search_memory(answer, "default", "trunk-based development")
    assert f"memory/archive/{old_day}.md#4 [{old_day}T10:00:00+00:00] The user adopted trunk-based development" in hits


def test_unconsolidated_old_files_are_merged_before_they_are_archived(tmp_path):
    (tmp_path / "memory").mkdir()
    old_day = (NOW - timedelta(days=200)).date().isoformat()
    (tmp_path / "memory" / f"{old_day}.md").write_text(_ledger(old_day, "An old fact"))
    failed = consolidate_memory(tmp_path, ScriptedModel(reply=RuntimeError("down")), now=NOW)
    assert failed.status == "failed" and failed.archived_files == ()
    assert (tmp_path / "memory" / f"{old_day}.md").exists()


def test_store_form_shares_the_rate_limit_between_workers(tmp_path):
    with SqliteStore.from_conn_string(str(tmp_path / "store.sqlite")) as store:
        store.setup()
        worker_a, worker_b = StoreStorage(store), StoreStorage(store)
        worker_a.replace_memory_file("ada@example.com", "MEMORY.md", OLD_MEMORY)
        worker_a.append_memory_file("ada@example.com", "memory/2026-11-29.md", _ledger("2026-11-29", "A new fact"))
        first = consolidate_memory(worker_a, ScriptedModel(reply=merge_answer), user_id="ada@example.com", now=NOW)
        second = consolidate_memory(
            worker_b, ScriptedModel(reply=merge_answer), user_id="ada@example.com", now=NOW + timedelta(minutes=1)
        )
        assert (first.status, second.status) == ("consolidated", "rate_limited")
        assert parse_bullets(worker_b.read_memory_file("ada@example.com", "MEMORY.md"))[-1] == "A new fact"
        assert (
            worker_b.read_memory_file("ada@example.com", "memory/backups/MEMORY-2026-11-29T12-00-00Z.md") == OLD_MEMORY
        )
        # another user's memory is untouched
        assert (
            consolidate_memory(worker_b, ScriptedModel(reply=merge_answer), user_id="bob", now=NOW).reason
            == "no new ledger entries"
        )


def test_memory_for_prompt_fits_the_budget_and_says_where_the_rest_is(tmp_path):
    assert memory_for_prompt(tmp_path) == ""
    lines = "".join(
        f"- Fact {i}: the service number {i} runs on host-{i}.internal with 4 replicas\n" for i in range(300)
    )
    (tmp_path / "MEMORY.md").write_text("# Memory\n\n" + lines)
    text = memory_for_prompt(tmp_path, max_tokens=500)
    assert estimate_text_tokens(text) <= 500
    assert text.startswith("# Memory\n\n- Fact 0:")
    kept = len(text.splitlines()) - 1
    assert text.splitlines()[-1] == (
        f"(MEMORY.md continues: {302 - kept} more lines; use memory_search, or memory_get on MEMORY.md from line {kept + 1})"
    )
    assert memory_for_prompt(tmp_path, max_tokens=100_000) == ("# Memory\n\n" + lines).strip()
    store = InMemoryStore()
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", "- short\n")
    assert memory_for_prompt(store, user_id="ada") == "- short"


def test_consolidation_node_reports_an_event_in_the_graph(tmp_path, memory_dir):
    builder = StateGraph(CompactionState)
    builder.add_node("consolidate", consolidation_node(ScriptedModel(reply=merge_answer), storage=memory_dir, now=NOW))
    builder.add_edge(START, "consolidate")
    builder.add_edge("consolidate", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    state = graph.invoke({"messages": [HumanMessage("hi")]}, config)
    (event,) = state["compaction"]["events"]
    assert event["stage"] == "consolidate" and event["status"] == "consolidated"
    state = graph.invoke({"messages": [HumanMessage("again")]}, config)
    assert state["compaction"]["events"][-1]["status"] == "rate_limited"


async def test_consolidation_node_runs_async_with_the_graph_store():
    store = InMemoryStore()
    StoreStorage(store).replace_memory_file("ada", "MEMORY.md", OLD_MEMORY)
    StoreStorage(store).append_memory_file("ada", "memory/2026-11-29.md", _ledger("2026-11-29", "A new fact"))
    builder = StateGraph(CompactionState)
    builder.add_node("consolidate", consolidation_node(ScriptedModel(reply=merge_answer), now=NOW))
    builder.add_edge(START, "consolidate")
    graph = builder.compile(store=store)
    state = await graph.ainvoke({"messages": []}, {"configurable": {"user_id": "ada"}})
    assert state["compaction"]["events"][0]["status"] == "consolidated"
    assert "- A new fact" in StoreStorage(store).read_memory_file("ada", "MEMORY.md")


def test_command_line_consolidates_through_an_openai_compatible_server(memory_dir, openai_server, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    openai_server.responder = lambda body: {"content": merge_answer(body["messages"][-1]["content"])}
    code = consolidate_main([str(memory_dir), "--base-url", openai_server.base_url, "--model", "gpt-4o-mini", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "consolidated" and out["entries_after"] == 5
    assert "deadline" in (memory_dir / "MEMORY.md").read_text()
    assert consolidate_main([str(memory_dir), "--base-url", openai_server.base_url]) == 0
    assert capsys.readouterr().out.startswith("rate_limited:")
    openai_server.responder = {"content": "<memory>\n- only this\n</memory>"}
    with open(memory_dir / "memory" / "2026-11-29.md", "a") as fh:
        fh.write(_ledger("2026-11-29", "Another fact", at="15:00:00"))
    assert consolidate_main([str(memory_dir), "--base-url", openai_server.base_url, "--force"]) == 1
    assert capsys.readouterr().out.startswith("refused:")


def test_command_line_reads_a_sqlite_store(tmp_path, openai_server, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    openai_server.responder = lambda body: {"content": merge_answer(body["messages"][-1]["content"])}
    db = tmp_path / "store.sqlite"
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        StoreStorage(store).append_memory_file("ada", "memory/2026-11-29.md", _ledger("2026-11-29", "Stored fact"))
    assert consolidate_main([f"sqlite:///{db}", "--user", "ada", "--base-url", openai_server.base_url]) == 0
    with SqliteStore.from_conn_string(str(db)) as store:
        assert "- Stored fact" in StoreStorage(store).read_memory_file("ada", "MEMORY.md")


def test_parse_answer_and_loss_check_are_pure():
    assert parse_answer("```markdown\n- a\n- b\n```") == ("- a\n- b\n", [])
    assert parse_answer("<memory>\n- a\n</memory>\n<superseded>\n- old b => replaced\n</superseded>") == (
        "- a\n",
        ["old b"],
    )
    assert parse_answer("<memory>\n- a") == (None, [])
    assert parse_answer("No bullets here.") == (None, [])
    old = "- The user prefers tabs\n- The user lives in Paris\n- The build uses make\n"
    merged = "- The user prefers tabs and lives in Paris, France\n- The build uses make and ninja\n"
    assert dropped_entries(old, merged, []) == []
    assert dropped_entries(old, "- The build uses make\n", ["The user lives in Paris"]) == ["The user prefers tabs"]
    chinese_old = "- 用户喜欢在周五发布版本\n"
    assert dropped_entries(chinese_old, "- 用户喜欢在周五发布版本，并先部署到预发环境\n", []) == []


def test_tools_and_consolidation_share_one_storage_contract(memory_dir):
    assert [t.name for t in make_compaction_tools(memory_dir)] == [
        "memory_search",
        "memory_get",
        "session_search",
        "recall",
        "compact",
        "pin",
        "unpin",
    ]
    with pytest.raises(ValueError, match="storage is None"):
        consolidate_memory(None, ScriptedModel())
    with pytest.raises(ValueError, match="max_tokens=10"):
        consolidate_memory(memory_dir, ScriptedModel(), max_tokens=10)

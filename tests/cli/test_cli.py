"""The ``langgraph-compaction`` command as a user runs it: demo, inspect, bad arguments, ChatOpenAI mode."""

import json
import os
import re
import shlex
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, ToolMessage, messages_from_dict
from support.openai_server import _MEMORY_MARKER, _SUMMARY_MARKER, request_text

from langgraph_compaction import CompactionConfig
from langgraph_compaction.cli import main


def _figure(output: str, row: str) -> tuple[int, int]:
    """Return the (with, without) numbers of a row of the totals table."""
    line = next(line for line in output.splitlines() if row in line)
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line.split(row, 1)[1])]
    return numbers[0], numbers[-1]


@pytest.fixture(scope="module")
def default_demo(tmp_path_factory):
    """Run the default demo once (all defaults but the thread) in a fresh directory; return (dir, output)."""
    root = tmp_path_factory.mktemp("demo")
    env_free = subprocess.run(
        [sys.executable, "-m", "langgraph_compaction", "demo", "--thread", "session-1"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in __import__("os").environ.items() if not k.startswith("OPENAI_")},
    )
    assert env_free.returncode == 0, env_free.stderr
    return root, env_free.stdout


def test_default_demo_is_a_long_session_that_compacts_and_costs_less(default_demo):
    root, out = default_demo
    lines = out.splitlines()
    assert lines[0].startswith("offline: no OPENAI_API_KEY")
    calls, _ = _figure(out, "agent model calls")
    assert calls >= 200
    compactions = [
        line for line in lines if re.match(r"turn +\d+ call +\d+ +extractive +[\d,]+ → +[\d,]+ tokens", line)
    ]
    assert len(compactions) >= 10
    before, after = map(lambda n: int(n.replace(",", "")), re.search(r"([\d,]+) → +([\d,]+)", compactions[0]).groups())
    assert after < before
    with_total, without_total = _figure(out, "total input tokens")
    assert with_total < without_total / 5
    peak_with, peak_without = _figure(out, "peak context tokens")
    assert peak_with < 48_000 < peak_without  # within the default window; without compaction far past it
    assert "Compaction saved" in out and "rebuilt from the transcript" in out


def test_default_demo_writes_the_files_it_names(default_demo):
    root, out = default_demo
    storage = root / ".compaction"
    transcript = messages_from_dict(
        [json.loads(line) for line in (storage / "sessions" / "session-1.jsonl").read_text().splitlines()]
    )
    assert len({m.id for m in transcript}) == len(transcript)
    assert any(isinstance(m, AIMessage) and len(m.tool_calls) >= 2 for m in transcript)  # parallel tool calls
    assert max(len(m.content) for m in transcript if isinstance(m, ToolMessage)) > 6_000  # large tool outputs
    ledger = storage / "memory" / f"{datetime.now(UTC).date().isoformat()}.md"
    assert ledger.read_text().startswith("## Flush ") and "\n- The user asked: Task 1:" in ledger.read_text()
    assert "transcript:  .compaction/sessions/session-1.jsonl" in out
    assert "MEMORY.md:   .compaction/MEMORY.md  (consolidation: consolidated)" in out
    assert (storage / "MEMORY.md").read_text().count("\n- The user asked: Task ") >= 10
    assert (storage / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with sqlite3.connect(storage / "checkpoints.sqlite") as conn:
        checkpoints = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'session-1'").fetchone()[0]
    assert checkpoints > 200
    # the totals show what the session left on disk: the checkpoints next to the transcript
    transcript_mb = (storage / "sessions" / "session-1.jsonl").stat().st_size / 1e6
    assert re.search(rf"transcript \(every message once\) +│ +{transcript_mb:.1f} MB", out)
    assert re.search(rf"checkpoints \({checkpoints:,} in SQLite\) +│ +[\d,.]+ MB", out)
    # one unit per figure: how often a layer acted, and the messages it touched
    layers = re.search(r"compactions by layer: (.*)", out).group(1).split(" · ")
    assert layers and all(re.fullmatch(r"\w+: [\d,]+ compactions?, [\d,]+ messages?", layer) for layer in layers)
    assert any(layer.startswith("extractive: ") for layer in layers)


def test_inspect_shows_the_thread_summary_transcript_and_memory(default_demo, capsys, monkeypatch):
    root, _ = default_demo
    monkeypatch.chdir(root)
    assert main(["inspect", "--thread", "session-1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("thread session-1 · ")
    assert re.search(r"compactions by layer: (.* · )?extractive: \d+ compactions?, [\d,]+ messages?", out)
    assert not re.search(r"state: 0 messages", out)
    assert "current summary\n" in out and "## SESSION INTENT" in out
    records = len((root / ".compaction" / "sessions" / "session-1.jsonl").read_text().splitlines())
    assert f"· {records:,} messages ·" in out
    assert re.search(r"memory/\d{4}-\d\d-\d\d\.md · [\d,]+ bytes · \d+ bullets", out)


def test_small_demo_runs_in_process_with_a_plot_where_asked(offline, capsys):
    assert main(["demo", "--turns", "3", "--thread", "t", "--plot", "out/plot.png", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "turns ━" not in out and "turn   2 call" not in out  # --quiet: no bar, no event lines
    assert "extractive" in out  # the totals still say which layer acted
    assert (offline / "out" / "plot.png").stat().st_size > 10_000
    assert main(["demo", "--turns", "1", "--thread", "u", "--no-plot", "--storage", "elsewhere"]) == 0
    assert not (offline / "elsewhere" / "demo.png").exists() and (offline / "elsewhere" / "checkpoints.sqlite").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["inspect", "--thread", "x", "--storage", "missing"], "--storage missing: no such directory"),
        (["inspect", "--thread", "nope"], "--thread 'nope' has no checkpoints"),
        (["demo", "--turns", "1", "--thread", "t"], "thread 't' already has checkpoints"),
    ],
)
def test_bad_arguments_get_one_clear_line_and_exit_status_2(offline, capsys, argv, message):
    main(["demo", "--turns", "1", "--thread", "t", "--quiet", "--no-plot"])
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith(f"langgraph-compaction {argv[0]}: error:") and err.count("\n") == 1


def test_inspect_lists_the_threads_that_exist(offline, capsys):
    main(["demo", "--turns", "1", "--thread", "first", "--quiet", "--no-plot"])
    assert main(["inspect", "--thread", "second"]) == 2
    assert "(threads there: first)" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["inspect"], ["demo", "--turns", "0"], ["demo", "--turns", "many"], ["frobnicate"]])
def test_argparse_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "usage: langgraph-compaction" in capsys.readouterr().err


def test_consolidate_is_the_memory_modules_own_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["consolidate", "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: langgraph-compaction consolidate")


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "{demo,inspect,consolidate}" in capsys.readouterr().err


def agent_responder():
    """Return a responder that plays the agent over HTTP: two rounds of parallel tool calls per request, then an answer.

    It counts rounds per request itself, as a model remembers its plan, because
    compaction may evict the request's earlier rounds from what it is sent.
    """
    rounds: dict[str, int] = {}

    def respond(body):
        text = request_text(body)
        if not body.get("tools") or _SUMMARY_MARKER in text or _MEMORY_MARKER in text.lower():
            return None  # the summarizer and the memory extractor get the server's default answers
        request = next(
            m["content"] for m in reversed(body["messages"]) if m["role"] == "user" and "Task " in str(m["content"])[:8]
        )
        done = rounds.get(request, 0)
        rounds[request] = done + 1
        if done >= 2 or body.get("tool_choice") == "none":
            return {"content": "Fixed it; the tests pass."}
        return {
            "content": None,
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": f"acme/core/module_{done}.py"}},
                {"name": "run_tests", "arguments": {"target": f"tests/core/test_module_{done}.py"}},
            ],
        }

    return respond


def test_with_an_api_key_chatopenai_runs_agent_and_summarizer_with_no_400s(
    openai_server, monkeypatch, tmp_path, capsys
):
    openai_server.responder = agent_responder()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    monkeypatch.chdir(tmp_path)
    assert (
        main(["demo", "--turns", "5", "--window", "16000", "--thread", "live", "--model", "gpt-4o-mini", "--no-plot"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(f"online: ChatOpenAI gpt-4o-mini at {openai_server.base_url}")
    assert openai_server.errors == []
    bodies = [request_text(b) for b in openai_server.requests]
    assert any(_SUMMARY_MARKER in b for b in bodies) and any(_MEMORY_MARKER in b.lower() for b in bodies)
    assert re.search(r"turn +\d+ call +\d+ +summarize +[\d,]+ → +[\d,]+ tokens", out)
    calls, _ = _figure(out, "agent model calls")
    assert calls == 15  # 5 requests x (2 tool rounds + the answer)
    reported, _ = _figure(out, "agent input tokens (API usage)")
    assert reported > 0


#: Root without the capabilities that let it read and write past file permissions: the checks a user who is not
#: root gets. A switch to ``nobody`` could not start this interpreter, which lies where only root may read.
_UNPRIVILEGED = [
    "setpriv",
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
]


@pytest.fixture(scope="module")
def unprivileged():
    """Return the command prefix that runs a command with a non-root user's file permissions ([] when not root)."""
    if os.geteuid() != 0:
        return []
    probe = subprocess.run([*_UNPRIVILEGED, sys.executable, "-c", "pass"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot drop root's file capabilities here (setpriv: {probe.stderr.strip() or probe.returncode})")
    return _UNPRIVILEGED


def _command(root, *args, env=None, prelude=None, prefix=()):
    """Run ``langgraph-compaction ARGS`` as a user does, without an OpenAI key unless ``env`` sets one.

    Returns the finished process. ``prelude`` is Python run before the command (to take a package away, as a
    venv without it would); ``prefix`` runs the command under another (``unprivileged``).
    """
    environ = {**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}, **(env or {})}
    start = (
        ["-m", "langgraph_compaction"]
        if prelude is None
        else ["-c", f"{prelude}; from langgraph_compaction.cli import main; raise SystemExit(main())"]
    )
    return subprocess.run(
        [*prefix, sys.executable, *start, *args], cwd=root, capture_output=True, text=True, timeout=120, env=environ
    )


def _consolidate(root, *args):
    """Run ``langgraph-compaction consolidate`` as a user does, without an OpenAI key; return the finished process."""
    return _command(root, "consolidate", *args)


def test_consolidate_offline_on_the_demos_storage_exits_0_and_reports_the_real_counts(default_demo):
    root, _ = default_demo
    bullets = (root / ".compaction" / "MEMORY.md").read_text().count("\n- ")
    # the demo consolidated a moment ago: rate limited, nothing to do, no model needed, MEMORY.md's real count
    limited = _consolidate(root, ".compaction")
    assert limited.returncode == 0, limited.stderr
    assert "Traceback" not in limited.stderr
    assert limited.stdout.startswith("rate_limited: ") and f"({bullets} -> {bullets} entries)" in limited.stdout
    forced = _consolidate(root, ".compaction", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (
        forced.stdout.startswith("unchanged: no new ledger entries")
        and f"({bullets} -> {bullets} entries)" in forced.stdout
    )


def test_consolidate_offline_merges_new_entries_with_the_offline_model(offline):
    day = datetime.now(UTC).date().isoformat()
    (offline / "store" / "memory").mkdir(parents=True)
    (offline / "store" / "memory" / f"{day}.md").write_text(
        "## Flush 10:00\n- The user prefers small diffs\n- The user ships on Fridays\n"
    )
    run = _consolidate(offline, "store")
    assert run.returncode == 0, run.stderr
    assert "offline" in run.stderr and run.stdout.startswith("consolidated: merged 2 new entries (0 -> 2 entries")
    assert "- The user prefers small diffs" in (offline / "store" / "MEMORY.md").read_text()


@pytest.mark.parametrize(
    "path, message",
    [
        ("no-such-dir", "no such directory"),
        ("not-storage", "not a storage folder"),
        ("not-storage/notes.txt", "it is a file, not a directory"),
    ],
)
def test_consolidate_on_a_mistyped_path_fails_and_creates_nothing(offline, path, message):
    (offline / "not-storage").mkdir()
    (offline / "not-storage" / "notes.txt").write_text("hello")
    before = sorted(p.relative_to(offline) for p in offline.rglob("*"))
    run = _consolidate(offline, path)
    assert run.returncode == 2
    assert message in run.stderr and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert sorted(p.relative_to(offline) for p in offline.rglob("*")) == before


def _one_error_line(err: str, command: str) -> str:
    assert (
        err.startswith(f"langgraph-compaction {command}: error:") and err.count("\n") == 1 and "Traceback" not in err
    ), err
    return err


@pytest.mark.parametrize("window", [100, 4_000, 10_000])
def test_a_window_below_the_smallest_gets_the_true_minimum_in_one_line(offline, capsys, window):
    smallest = (
        CompactionConfig().smallest_window()
    )  # the demo changes only layer 2's thresholds, not the window's floor
    assert window < smallest
    assert main(["demo", "--turns", "1", "--thread", "t", "--window", str(window), "--no-plot"]) == 2
    err = _one_error_line(capsys.readouterr().err, "demo")
    assert f"--window must be at least {smallest:,} tokens (got {window:,})" in err
    assert main(["demo", "--turns", "1", "--thread", "t", "--window", str(smallest), "--no-plot", "--quiet"]) == 0


@pytest.mark.parametrize("storage", ["a-file", "a-file/below", "/proc/no-such-folder"])
def test_demo_on_a_storage_path_that_cannot_be_a_folder_gets_one_line(offline, capsys, storage):
    (offline / "a-file").write_text("not a folder")
    assert main(["demo", "--turns", "1", "--thread", "t", "--storage", storage, "--no-plot"]) == 2
    err = _one_error_line(capsys.readouterr().err, "demo")
    assert f"--storage {storage}: " in err


def test_inspect_without_the_demo_extra_says_which_extra_to_install(offline):
    run = _command(offline, "inspect", "--thread", "t", prelude="import sys; sys.modules['rich'] = None")
    assert run.returncode == 2
    assert "pip install 'langgraph-compaction[demo]'" in _one_error_line(run.stderr, "inspect")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_key_that_is_set_but_unusable_gets_one_line_and_status_1(offline):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    run = _command(
        offline, "demo", "--turns", "2", "--thread", "t", env={"OPENAI_API_KEY": "sk-bogus", "OPENAI_BASE_URL": url}
    )
    assert run.returncode == 1
    err = _one_error_line(run.stderr, "demo")
    assert url in err and "unset OPENAI_API_KEY to run offline" in err


def test_the_files_the_demo_writes_are_private(offline, capsys):
    old = os.umask(0o022)  # a usual umask: what the process would get without asking
    try:
        assert main(["demo", "--turns", "12", "--thread", "t", "--quiet"]) == 0
    finally:
        os.umask(old)
    storage = offline / ".compaction"
    files = [p for p in storage.rglob("*") if p.is_file()]
    assert {"checkpoints.sqlite", "demo.png", "t.jsonl", "MEMORY.md"} <= {p.name for p in files}
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o600 for p in files}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o700 for p in [storage, *storage.rglob("*")] if p.is_dir())


def _hint(out: str) -> list[str]:
    """Return the arguments of the demo's "look again with" line, split as a shell would."""
    line = next(line for line in out.splitlines() if line.startswith("look again with: "))
    words = shlex.split(line.removeprefix("look again with: "))
    assert words[0] == "langgraph-compaction"
    return words[1:]


def test_the_look_again_hint_is_a_command_the_shell_runs_as_shown(offline, capsys):
    assert main(["demo", "--turns", "1", "--thread", "a [b]/c", "--storage", "my store", "--no-plot", "--quiet"]) == 0
    hint = _hint(capsys.readouterr().out)
    assert hint == ["inspect", "--thread", "a [b]/c", "--storage", "my store"]
    assert main(hint) == 0
    assert capsys.readouterr().out.startswith("thread a [b]/c · ")


def test_an_empty_thread_id_is_a_thread_of_its_own_as_in_the_library(offline, capsys):
    assert main(["demo", "--turns", "1", "--thread", "", "--no-plot", "--quiet"]) == 0
    assert _hint(capsys.readouterr().out) == ["inspect", "--thread", "", "--storage", ".compaction"]
    with sqlite3.connect(offline / ".compaction" / "checkpoints.sqlite") as conn:
        assert [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")] == [""]
    assert main(["inspect", "--thread", ""]) == 0


def _printed_paths(out: str) -> dict[str, str]:
    labels = ("checkpoints:", "transcript:", "ledger:", "MEMORY.md:", "plot:")
    return {
        line.split(":", 1)[0]: line.split(":", 1)[1].split("  (")[0].strip()
        for line in out.splitlines()
        if line.startswith(labels)
    }


def test_a_session_too_short_to_compact_names_no_file_it_did_not_write(offline, capsys):
    assert main(["demo", "--turns", "1", "--thread", "t", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "compactions by layer: none" in out
    printed = _printed_paths(out)
    assert printed["transcript"].startswith("none")
    assert all((offline / path).exists() for label, path in printed.items() if not path.startswith("none"))


def test_a_short_session_where_compaction_costs_more_says_so_plainly(offline, capsys):
    assert main(["demo", "--turns", "2", "--thread", "t", "--no-plot", "--quiet"]) == 0
    out = capsys.readouterr().out
    billed_with, billed_without = _figure(out, "(cached prefix at 0.1×)")
    assert billed_without < billed_with
    assert "as much without compaction as with it" not in out
    assert (
        f"without compaction the input would have cost less ({billed_without:,} against {billed_with:,})"
        in " ".join(out.split())
    )


def test_inspect_shows_transcript_and_memory_of_a_folder_without_checkpoints(offline, capsys):
    assert main(["demo", "--turns", "12", "--thread", "t", "--no-plot", "--quiet"]) == 0
    capsys.readouterr()
    (
        offline / ".compaction" / "checkpoints.sqlite"
    ).unlink()  # as add_compaction's folder is: the checkpoints are elsewhere
    assert main(["inspect", "--thread", "t"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("thread t · no checkpoints.sqlite in .compaction")
    records = len((offline / ".compaction" / "sessions" / "t.jsonl").read_text().splitlines())
    assert f"· {records:,} messages ·" in out
    assert re.search(r"memory/\d{4}-\d\d-\d\d\.md · [\d,]+ bytes · \d+ bullets", out)


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"langgraph-compaction {version('langgraph-compaction')}\n"


@pytest.mark.parametrize("command", ["demo", "inspect"])
def test_an_unknown_option_shows_the_commands_own_usage(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--thread", "t", "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: langgraph-compaction {command} ") and "unrecognized arguments: --bogus" in err


def _calls(out: str) -> int:
    return int(re.search(r"(\d+) model calls in", out).group(1))


def _thread_values(storage, thread: str) -> dict:
    """Return the thread's latest state, read back as ``inspect`` reads it."""
    from langgraph_compaction.cli.inspect import open_checkpoints, thread_values

    with open_checkpoints(str(storage / "checkpoints.sqlite")) as checkpoints:
        return thread_values(checkpoints, thread)[0]


def _history_ids(storage, thread: str) -> list[str]:
    """Return the ids of the thread's whole conversation as written (transcript, then the live state).

    The thread's name is taken out of them.
    """
    from langgraph_compaction.cli.report import uncompacted_history

    values = _thread_values(storage, thread)
    records = [json.loads(line) for line in (storage / "sessions" / f"{thread}.jsonl").read_text().splitlines()]
    return [
        re.sub(f"^{re.escape(thread)}-", "<thread>-", m.id) for m in uncompacted_history(records, values["messages"])
    ]


def test_an_interrupted_demo_goes_on_with_resume_as_if_never_stopped(offline, capsys, monkeypatch):
    from langgraph_compaction.cli import offline as demo
    from langgraph_compaction.testing import openai_violations

    assert main(["demo", "--turns", "8", "--thread", "whole", "--no-plot", "--quiet"]) == 0
    whole = _calls(capsys.readouterr().out)

    scripted, calls = demo.scripted_round, []

    def ctrl_c_in_turn_4(turn, step, seed):
        if (turn, step) == (3, 2):
            raise KeyboardInterrupt
        calls.append((turn, step))
        return scripted(turn, step, seed)

    monkeypatch.setattr(demo, "scripted_round", ctrl_c_in_turn_4)
    assert main(["demo", "--turns", "8", "--thread", "t", "--no-plot", "--quiet"]) == 130
    err = capsys.readouterr().err
    resume = shlex.split(err.split("continue it with: ", 1)[1])
    assert resume == ["langgraph-compaction", "demo", "--resume", "--thread", "t", "--turns", "8"]
    assert main(["demo", "--turns", "8", "--thread", "t", "--no-plot"]) == 2
    assert "pass --resume to continue it" in capsys.readouterr().err

    monkeypatch.setattr(demo, "scripted_round", scripted)
    assert main([*resume[1:], "--no-plot", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "resuming thread t at request 4 of 8" in out
    assert len(calls) + _calls(out) == whole  # the interrupted request goes on from its next step, not from its first
    storage = offline / ".compaction"
    assert _history_ids(storage, "t") == _history_ids(storage, "whole")
    values = _thread_values(storage, "t")
    assert openai_violations(values["messages"]) == []


def test_resume_needs_a_thread_that_exists(offline, capsys):
    assert main(["demo", "--turns", "2", "--thread", "nope", "--resume", "--no-plot"]) == 2
    assert "--resume: thread 'nope' has no checkpoints" in capsys.readouterr().err


# --- mistakes a user makes, each answered in one line -----------------------------------------------------------


def test_consolidate_on_an_unreachable_postgresql_says_so_in_one_line(offline):
    dsn = f"postgresql://postgres@127.0.0.1:{_closed_port()}/nope"
    run = _consolidate(offline, dsn)
    assert run.returncode == 2
    err = _one_error_line(run.stderr, "consolidate")
    assert dsn in err and "cannot open the PostgreSQL store" in err and "Connection refused" in err


def test_consolidate_on_a_sqlite_store_in_a_missing_folder_says_so_and_creates_nothing(offline):
    run = _consolidate(offline, f"sqlite://{offline}/no-such-folder/store.db")
    assert run.returncode == 2
    err = _one_error_line(run.stderr, "consolidate")
    assert f"the folder {offline}/no-such-folder does not exist" in err
    assert list(offline.iterdir()) == []


def test_inspect_on_a_storage_folder_the_user_may_not_read_says_so(offline, capsys, unprivileged):
    assert main(["demo", "--turns", "1", "--thread", "t", "--quiet", "--no-plot"]) == 0
    (offline / ".compaction").chmod(0o000)
    try:
        run = _command(offline, "inspect", "--thread", "t", prefix=unprivileged)
    finally:
        (offline / ".compaction").chmod(0o700)
    assert run.returncode == 2
    assert "--storage .compaction: cannot read the folder (Permission denied)" in _one_error_line(run.stderr, "inspect")


def test_inspect_reads_a_copy_the_user_may_read_but_not_write(offline, capsys, unprivileged):
    assert main(["demo", "--turns", "3", "--thread", "t", "--quiet", "--no-plot"]) == 0
    copy = offline / "copy"
    shutil.copytree(offline / ".compaction", copy)
    with closing(sqlite3.connect(copy / "checkpoints.sqlite")) as conn:  # as the demo leaves it: write-ahead logging
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        checkpoints = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 't'").fetchone()[0]
    assert sorted(p.name for p in copy.glob("checkpoints.sqlite*")) == ["checkpoints.sqlite"]  # no -wal, no -shm
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        run = _command(offline, "inspect", "--thread", "t", "--storage", "copy", prefix=unprivileged)
    finally:
        for path in [copy, *copy.rglob("*")]:
            path.chmod(0o700 if path.is_dir() else 0o600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"thread t · {checkpoints} checkpoints in copy/checkpoints.sqlite")
    assert re.search(r"compactions by layer: extractive: \d+ compactions?", run.stdout)


def test_demo_into_a_read_only_folder_says_so_in_one_line(offline, unprivileged):
    (offline / "ro").mkdir(mode=0o555)
    (offline / "ro-storage").mkdir(mode=0o555)
    for where, argv in [("ro", []), (".", ["--storage", "ro-storage"])]:
        run = _command(offline / where, "demo", "--turns", "1", "--thread", "t", *argv, prefix=unprivileged)
        assert run.returncode == 2, run.stderr
        err = _one_error_line(run.stderr, "demo")
        assert "(Permission denied); pass a folder the demo may" in err
        assert run.stdout == ""  # said before the session starts
    assert list((offline / "ro").iterdir()) == list((offline / "ro-storage").iterdir()) == []


@pytest.mark.parametrize("plot", ["a-file/plot.png", "/proc/no-such-folder/plot.png", "."])
def test_demo_plot_to_a_path_that_cannot_be_written_says_so_before_the_session(offline, capsys, plot):
    (offline / "a-file").write_text("not a folder")
    assert main(["demo", "--turns", "1", "--thread", "t", "--plot", plot]) == 2
    captured = capsys.readouterr()
    assert f"--plot {plot}: cannot write it (" in _one_error_line(captured.err, "demo")
    assert captured.out == "" and not (offline / ".compaction").exists()


def test_the_plot_check_leaves_no_file_when_the_session_then_fails(offline, capsys):
    assert main(["demo", "--turns", "1", "--thread", "t", "--quiet", "--plot", "plots/p.png"]) == 0
    assert (offline / "plots" / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["demo", "--turns", "1", "--thread", "t", "--quiet", "--plot", "plots/q.png"]) == 2  # t exists
    assert "already has checkpoints" in capsys.readouterr().err
    assert not (offline / "plots" / "q.png").exists()


# --- inspect --checkpointer: what a PostgreSQL app sees ---------------------------------------------------------


def _postgres_app_thread(dsn: str, storage, thread: str, turns: int) -> None:
    """Run the demo's graph, checkpointed by a real PostgresSaver as an app deployed on PostgreSQL is, for ``turns``."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.postgres import PostgresSaver

    from langgraph_compaction.cli.demo import build_demo_graph, demo_config, make_tools
    from langgraph_compaction.cli.offline import offline_agent
    from langgraph_compaction.cli.workload import request_text
    from langgraph_compaction.core.tokens import TokenCounter
    from langgraph_compaction.storage import FileStorage
    from langgraph_compaction.testing import ScriptedModel

    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        agent = offline_agent(7, TokenCounter(), {})
        config = demo_config(48_000)
        graph = build_demo_graph(
            agent, make_tools(7), None, ScriptedModel(), config, FileStorage(storage), saver, lambda *_: None
        )
        for turn in range(turns):
            request = HumanMessage(request_text(turn, 7), id=f"{thread}-request-{turn + 1}")
            graph.invoke({"messages": [request]}, {"configurable": {"thread_id": thread}, "recursion_limit": 100})


def test_inspect_reads_a_postgresql_apps_events_counts_and_state(postgres_dsn, offline, capsys, monkeypatch):
    import psycopg

    _postgres_app_thread(postgres_dsn, offline / "files", "pg-app", turns=4)
    with psycopg.connect(postgres_dsn) as conn:
        checkpoints = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'pg-app'").fetchone()[0]
    monkeypatch.setenv("COLUMNS", "80")  # a terminal's width, and what a pipe gets
    assert main(["inspect", "--thread", "pg-app", "--checkpointer", postgres_dsn]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"thread pg-app · {checkpoints} checkpoints in {postgres_dsn}\n")
    assert re.search(r"compactions by layer: extractive: \d+ compactions?, [\d,]+ messages", out)
    assert "## SESSION INTENT" in out  # the current summary, read from the state
    assert "pass --storage with the folder given to add_compaction" in out  # no storage folder was named
    # with its storage folder: the transcript and memory beside the state
    assert main(["inspect", "--thread", "pg-app", "--checkpointer", postgres_dsn, "--storage", "files"]) == 0
    assert re.search(r"transcript: .*pg-app\.jsonl · [\d,]+ messages", capsys.readouterr().out)


def test_inspect_events_table_keeps_every_figure_whole_at_80_columns(postgres_dsn, offline, capsys, monkeypatch):
    from langgraph_compaction.cli.inspect import open_checkpoints, thread_values

    _postgres_app_thread(postgres_dsn, offline / "files", "pg-wide", turns=6)
    with open_checkpoints(postgres_dsn) as checkpoints:
        events = thread_values(checkpoints, "pg-wide")[0]["compaction"]["events"]
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["inspect", "--thread", "pg-wide", "--checkpointer", postgres_dsn]) == 0
    out = capsys.readouterr().out
    table = out[out.index("compaction events") : out.index("current summary")]
    assert "…" not in table and max(len(line) for line in table.splitlines()) <= 80
    figures = [(e["tokens_before"], e["tokens_after"]) for e in events if isinstance(e.get("tokens_before"), int)]
    assert figures
    for before, after in figures:
        assert re.search(rf"\b{before:,}\s+{after:,}\b", table), (before, after)


@pytest.mark.parametrize(
    "spec, message",
    [
        (f"postgresql://postgres@127.0.0.1:{_closed_port()}/nope", "cannot connect (connection failed"),
        ("missing.sqlite", "--checkpointer missing.sqlite: no such file"),
        ("notes.txt", "--checkpointer notes.txt: not a database a LangGraph SqliteSaver wrote"),
    ],
    ids=["closed-port", "missing-file", "not-a-database"],  # the port is chosen at collection: not in the id
)
def test_inspect_on_a_checkpointer_it_cannot_read_says_so_in_one_line(offline, capsys, spec, message):
    (offline / "notes.txt").write_text("hello")
    assert main(["inspect", "--thread", "t", "--checkpointer", spec]) == 2
    assert message in _one_error_line(capsys.readouterr().err, "inspect")

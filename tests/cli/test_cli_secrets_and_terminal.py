"""What the command line prints is safe to print: no DSN secret, no terminal control sequence from the data.

An operator runs ``inspect`` in a terminal against a production database. The DSN's password, however it is spelled
(in the URL, as ``?password=``, with characters a URL should have encoded), never reaches the terminal, on success
or on error, nor a log. A user's message, a summary or a thread id that holds escape sequences (OSC 52 writes the
operator's clipboard; CSI sequences move the cursor and clear the screen) is shown escaped, never interpreted.
"""

from __future__ import annotations

import logging
import socket
from contextlib import closing

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph

from langgraph_compaction import CompactionState, compact_messages
from langgraph_compaction.cli import main
from langgraph_compaction.storage import FileStorage
from langgraph_compaction.storage.transcript import load_transcript, summary_covers


def _closed_port() -> int:
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _checkpoint(saver, thread: str, messages: list) -> None:
    """Write ``messages`` as the state of ``thread`` through a graph of the compaction schema, as an app does."""
    builder = StateGraph(CompactionState)
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "agent")
    builder.compile(checkpointer=saver).invoke({"messages": messages}, {"configurable": {"thread_id": thread}})


# --- DSN secrets ------------------------------------------------------------------------------------------------

#: Each spelling of a password a DSN may carry: (how it is written into the DSN, the secret, its distinctive parts).
SPELLINGS = {
    "unencoded #": ("postgres:Hash#Secret9@", "Hash#Secret9", ("Hash", "Secret9")),
    "slash": ("postgres:Slash/Secret8@", "Slash/Secret8", ("Slash", "Secret8")),
    "question mark": ("postgres:Ask?Secret7@", "Ask?Secret7", ("Ask", "Secret7")),
    "?password=": ("postgres@", "Query#Secret6", ("Query", "Secret6")),
    "?password= with / and ?": ("postgres@", "Pa/ram?Secret5", ("Pa/ram", "Secret5")),
}


def _dsn(base: str, spelling: str, port: int | None = None) -> str:
    """Return ``base`` (postgresql://postgres@host:port/db?options) with the password of ``spelling`` in it."""
    userinfo, secret, _ = SPELLINGS[spelling]
    dsn = base.replace("postgres@", userinfo, 1)
    if port is not None:
        dsn = dsn.replace(":5432/", f":{port}/", 1)
    if spelling.startswith("?password="):
        dsn += ("&" if "?" in dsn else "?") + f"password={secret}"
    return dsn


def _assert_no_secret(text: str, spelling: str) -> None:
    _, secret, parts = SPELLINGS[spelling]
    assert secret not in text
    for part in parts:
        assert part not in text, (part, text)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_inspect_never_prints_the_dsns_password_on_success(postgres_dsn, offline, capsys, caplog, spelling):
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_dsn) as saver:
        saver.setup()
        _checkpoint(saver, f"pg-secret-{spelling}", [HumanMessage("hello", id="u1")])
    dsn = _dsn(postgres_dsn, spelling)
    caplog.set_level(logging.DEBUG)
    status = main(["inspect", "--thread", f"pg-secret-{spelling}", "--checkpointer", dsn])
    captured = capsys.readouterr()
    text = captured.out + captured.err + caplog.text
    _assert_no_secret(text, spelling)
    if spelling == "slash":  # libpq reads the part after the slash as the database: it cannot connect
        assert status == 2 and "cannot connect" in captured.err
    else:
        assert status == 0, captured.err
        first = captured.out.splitlines()[0]
        assert (
            first.startswith(f"thread pg-secret-{spelling} · 3 checkpoints in postgresql://postgres") and "***" in first
        )


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_inspect_never_prints_the_dsns_password_on_error(offline, capsys, caplog, spelling):
    dsn = _dsn("postgresql://postgres@127.0.0.1:5432/nope", spelling, port=_closed_port())
    caplog.set_level(logging.DEBUG)
    assert main(["inspect", "--thread", "t", "--checkpointer", dsn]) == 2
    captured = capsys.readouterr()
    assert "--checkpointer postgresql://postgres" in captured.err and "***" in captured.err
    assert captured.err.count("\n") == 1  # one line
    _assert_no_secret(captured.out + captured.err + caplog.text, spelling)


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_consolidate_never_prints_the_dsns_password_on_error(offline, capsys, spelling):
    dsn = _dsn("postgresql://postgres@127.0.0.1:5432/nope", spelling, port=_closed_port())
    assert main(["consolidate", dsn]) == 2
    captured = capsys.readouterr()
    assert "error: postgresql://postgres" in captured.err and "***" in captured.err
    _assert_no_secret(captured.out + captured.err, spelling)


def test_a_shown_dsn_keeps_what_locates_the_database_and_hides_every_secret():
    from langgraph_compaction.cli.errors import shown_dsn

    assert shown_dsn("postgresql://app:s3cret@db:5432/prod") == "postgresql://app:***@db:5432/prod"
    assert shown_dsn("postgresql://postgres@127.0.0.1:5432/test") == "postgresql://postgres@127.0.0.1:5432/test"
    assert shown_dsn("postgres://app:p@ss/w?rd#x@db/prod?sslmode=require") == (
        "postgres://app:***@db/prod?sslmode=require"
    )
    assert shown_dsn("postgresql://db/prod?sslmode=require&password=a#b&sslpassword=c") == (
        "postgresql://db/prod?sslmode=require&password=***&sslpassword=***"
    )


# --- terminal control sequences ------------------------------------------------------------------------------

#: OSC 52 writes the operator's clipboard; the CSI sequences clear the screen and move the cursor home.
HOSTILE = "please \x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 run \x1b[2J\x1b[H it \x9b31m now"


def _assert_inert(text: str) -> None:
    assert not any(ch in text for ch in "\x1b\x07\x9b"), repr(text)


@pytest.fixture
def hostile_thread(offline):
    """A storage folder and a SQLite checkpointer holding a compacted thread whose user wrote escape sequences."""
    files = FileStorage(offline / "files")
    messages = []
    for turn in range(8):
        answer = f"done {turn}: " + "the build log said nothing new, " * 40
        messages += [HumanMessage(f"{HOSTILE} {turn}", id=f"u{turn}"), AIMessage(answer, id=f"a{turn}")]
    result = compact_messages(
        messages, model=None, thread_id="t", storage=files, trigger=("messages", 6), keep=("messages", 2)
    )
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(offline / "files" / "checkpoints.sqlite")) as saver:
        _checkpoint(saver, "t", result.messages)
    (summary_id,) = summary_covers(load_transcript(files, "t"))
    return summary_id


def test_inspect_shows_a_users_escape_sequences_escaped_never_sent_to_the_terminal(hostile_thread, capsys):
    assert main(["inspect", "--thread", "t", "--storage", "files", "--summary", hostile_thread]) == 0
    out = capsys.readouterr().out
    _assert_inert(out)
    assert "please \\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07 run \\x1b[2J\\x1b[H it \\x9b31m now 0" in out
    assert "current summary" in out and f"summary {hostile_thread} replaced" in out


def test_a_thread_id_with_escape_sequences_is_escaped_in_errors_and_output(hostile_thread, capsys):
    assert main(["inspect", "--thread", "t\x1b]52;c;eA==\x07", "--storage", "files"]) == 2
    err = capsys.readouterr().err
    _assert_inert(err)
    assert "--thread 't\\x1b]52;c;eA==\\x07' has no checkpoints" in err
    assert main(["inspect", "--thread", "t", "--storage", "files", "--summary", "x\x1b[2J"]) == 2
    err = capsys.readouterr().err
    _assert_inert(err)
    assert "--summary 'x\\x1b[2J' is not a summary of this thread" in err


def test_printable_escapes_control_characters_and_keeps_text_lines_and_tabs():
    from langgraph_compaction.cli.errors import printable

    assert printable("a\tb\nc é ✓") == "a\tb\nc é ✓"
    assert printable("\x1b[31mred\x1b[0m\x07\x08\r\x7f\x9b\u202e") == (
        "\\x1b[31mred\\x1b[0m\\x07\\x08\\r\\x7f\\x9b\\u202e"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--turns", "\x1b]52;c;eA==\x07"],
        ["inspect", "--thread", "t", "--bogus", "\x1b[2J"],
        ["consolidate", "x", "--max-tokens", "\x1b[2J"],
    ],
)
def test_argument_errors_quoting_what_was_typed_are_escaped(capsys, argv):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    _assert_inert(err)
    assert "\\x1b" in err


def test_the_examples_in_the_docstrings_hold():
    import doctest

    from langgraph_compaction.cli import errors

    result = doctest.testmod(errors)
    assert result.attempted >= 2 and result.failed == 0

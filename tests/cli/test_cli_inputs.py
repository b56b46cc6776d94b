"""What the command line says about inputs it cannot use: a package not installed, a DSN or URL of the wrong kind.

Each is one line naming what to do (the install command, the form to write, the flag to use), exit status 2, no
traceback. A missing package is simulated in a fresh interpreter whose import system refuses it, as an environment
that installed only ``[demo]`` would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from langgraph_compaction.cli import main

POSTGRES_INSTALL = 'pip install "langgraph-compaction[postgres]"'


def _without(modules: tuple[str, ...], argv: list[str], cwd) -> subprocess.CompletedProcess:
    """Run the command in a fresh interpreter where importing ``modules`` (and what is below them) fails."""
    script = textwrap.dedent(
        f"""
        import sys
        from importlib.abc import MetaPathFinder

        BLOCKED = {modules!r}

        class NotInstalled(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if any(name == blocked or name.startswith(blocked + ".") for blocked in BLOCKED):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        from langgraph_compaction.cli import main
        sys.exit(main({argv!r}))
        """
    )
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "argv, module",
    [
        (["inspect", "--thread", "t", "--checkpointer", "postgresql://app:s3cret@db/prod"], "psycopg"),
        (
            ["inspect", "--thread", "t", "--checkpointer", "postgresql://app:s3cret@db/prod"],
            "langgraph.checkpoint.postgres",
        ),
        (["inspect", "--thread", "t", "--store", "postgresql://app:s3cret@db/prod"], "psycopg"),
        (["inspect", "--thread", "t", "--store", "postgresql://app:s3cret@db/prod"], "langgraph.store.postgres"),
        (["consolidate", "postgresql://app:s3cret@db/prod"], "psycopg"),
        (["consolidate", "postgresql://app:s3cret@db/prod"], "langgraph.store.postgres"),
    ],
)
@pytest.mark.slow  # a fresh interpreter per case
def test_postgresql_without_its_packages_is_one_line_naming_the_extra(offline, argv, module):
    ran = _without((module,), argv, offline)
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr
    assert ran.stderr.rstrip().endswith(POSTGRES_INSTALL)
    assert "s3cret" not in ran.stderr


def test_a_sqlite_store_without_its_package_is_one_line_naming_the_extra(offline):
    ran = _without(("langgraph.store.sqlite",), ["consolidate", "sqlite:///memory.db"], offline)
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr
    assert ran.stderr.rstrip().endswith("pip install 'langgraph-compaction[demo]'")


def test_the_postgres_extra_installs_what_postgresql_needs():
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extra = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["optional-dependencies"]["postgres"]
    assert {dependency.split(">")[0] for dependency in extra} == {"psycopg[binary]", "langgraph-checkpoint-postgres"}


KEY_VALUE = "host=db.internal port=5432 dbname=prod user=app password=s3cret"


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["inspect", "--thread", "t", "--checkpointer", KEY_VALUE], "--checkpointer"),
        (["inspect", "--thread", "t", "--store", KEY_VALUE], "--store"),
        (["consolidate", KEY_VALUE], "storage"),
    ],
)
def test_a_libpq_key_value_dsn_is_refused_with_the_url_form_and_without_its_password(offline, capsys, argv, flag):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{flag}: a key=value connection string (host=... dbname=...) is not read here" in err
    assert "postgresql://USER:PASSWORD@HOST:PORT/DBNAME" in err
    assert "s3cret" not in err
    assert not list(offline.iterdir())  # nothing was created, no SQLite file by that name


@pytest.mark.parametrize("flag", ["--checkpointer", "--store"])
def test_an_http_url_given_to_inspect_points_at_url(offline, capsys, flag):
    assert main(["inspect", "--thread", "t", flag, "http://127.0.0.1:2024"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{flag} http://127.0.0.1:2024: a LangGraph server, not a database; "
        "inspect a thread it serves with --url http://127.0.0.1:2024"
    ) in err
    assert not list(offline.iterdir())


def test_an_http_url_given_to_consolidate_is_refused(offline, capsys):
    assert main(["consolidate", "https://example.langgraph.app"]) == 2
    err = capsys.readouterr().err
    assert "storage https://example.langgraph.app: a LangGraph server, not a database" in err
    assert not list(offline.iterdir())

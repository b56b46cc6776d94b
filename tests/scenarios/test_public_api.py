"""The package's public surface: a short ``__all__``, every name it ever exported still importable, each documented.

``langgraph_compaction.__all__`` lists what an application uses (the fronts, the settings, the state, storage,
memory, the controls and the errors); the building blocks underneath are imported from their own modules, one
import path each. Every public callable, there and in ``langgraph_compaction.testing``,
describes each of its parameters in the ``Args:`` section the API reference renders.
"""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pydantic
import pytest

import langgraph_compaction
from langgraph_compaction import testing

ROOT = Path(__file__).resolve().parents[2]

#: Every name ``from langgraph_compaction import ...`` accepted when the top listed 63 of them, less
#: ``with_overflow_recovery`` (deleted: ``add_compaction`` wraps the model node itself) and ``CompactionNodes``
#: (deleted: ``langgraph_compaction.engine.nodes.CompactionEngine`` under an earlier name).
FORMER_EXPORTS = (
    "Budget CompactionConfig CompactionInfo CompactionMiddleware CompactionPlan CompactionResult "
    "CompactionState CompactionStorage ConsolidationResult ContextTooLongError Cut FLUSH FidelityConfig FileStorage "
    "GATE MicroCompactConfig OFFLOAD PruneConfig SUMMARIZE SUMMARY_MESSAGE_NAME StoreStorage TokenCounter "
    "TruncateArgsConfig acompact_messages aconsolidate_memory add_compaction ainvoke_with_recovery aload_transcript "
    "amemory_for_prompt anthropic_violations build_summary_message compact_messages complete_summary "
    "consolidate_memory consolidation_node estimate_tokens extractive_summary find_cutoff invoke_with_recovery "
    "is_context_overflow is_summary load_transcript make_compaction_tools make_pre_model_hook memory_for_prompt "
    "merge_compaction open_storage openai_violations overflow_figures pin_constraint plan_compaction read_compaction "
    "redact_secrets safe_label seed_estimate_tokens stated_rules subgraph_node summary_message_id unpin_constraint "
    "view_violations with_cache_breakpoints"
).split()

#: Where each building block is documented and imported from (the top does not serve it).
HOMES = {
    "langgraph_compaction.core.config": [
        "Budget",
        "BackgroundConfig",
        "FidelityConfig",
        "GuardsConfig",
        "MemoryConfig",
        "MicroCompactConfig",
        "PruneConfig",
        "SummaryConfig",
        "TruncateArgsConfig",
    ],
    "langgraph_compaction.core.plan": ["CompactionPlan", "Cut", "find_cutoff", "plan_compaction"],
    "langgraph_compaction.engine.nodes": ["FLUSH", "GATE", "OFFLOAD", "SUMMARIZE", "CompactionEngine"],
    "langgraph_compaction.engine.state": ["merge_compaction", "read_compaction"],
    "langgraph_compaction.core.summary": ["build_summary_message", "extractive_summary", "summary_message_id"],
    "langgraph_compaction.core.fidelity": ["complete_summary", "stated_rules"],
    "langgraph_compaction.core.tokens": ["TokenCounter", "estimate_tokens", "seed_estimate_tokens"],
    "langgraph_compaction.testing": ["anthropic_violations", "openai_violations", "view_violations"],
    "langgraph_compaction.fronts.functional": ["CompactionResult"],
    "langgraph_compaction.memory.consolidation": ["ConsolidationResult"],
    "langgraph_compaction.core.conversation": ["SUMMARY_MESSAGE_NAME"],
    "langgraph_compaction.engine.errors": ["is_context_overflow", "overflow_figures"],
    "langgraph_compaction.core.redact": ["redact_secrets"],
    "langgraph_compaction.core.caching": ["with_cache_breakpoints"],
    "langgraph_compaction.storage": ["open_storage", "safe_label"],
    "langgraph_compaction.fronts.controls": ["ContextUsage", "ThreadCompaction", "compaction_engines"],
}
HOME_OF = {name: home for home, names in HOMES.items() for name in names}


def test_the_top_lists_at_most_thirty_five_names_each_once_and_sorted():
    names = langgraph_compaction.__all__
    assert len(names) <= 35
    assert names == sorted(set(names))


def test_the_top_lists_the_fronts_the_settings_the_state_storage_memory_the_controls_and_the_errors():
    expected = {
        "add_compaction", "CompactionMiddleware", "make_pre_model_hook", "compact_messages", "subgraph_node",
        "CompactionConfig", "CompactionState", "FileStorage", "StoreStorage", "load_transcript",
        "consolidate_memory", "pin_constraint", "is_summary", "CompactionInfo", "ContextTooLongError",
        "compact_thread", "acompact_thread", "context_usage", "wait_for_compaction", "await_compaction",
    }  # fmt: skip
    assert expected <= set(langgraph_compaction.__all__)


@pytest.mark.parametrize("name", FORMER_EXPORTS)
def test_every_former_export_is_importable_from_the_top_or_its_home(name):
    namespace: dict = {}
    exec(f"from {HOME_OF.get(name, 'langgraph_compaction')} import {name}", namespace)
    assert namespace[name] is not None


@pytest.mark.parametrize("home,name", [(home, name) for home, names in HOMES.items() for name in names])
def test_a_building_block_is_in_its_modules_public_listing_and_has_no_second_path_from_the_top(home, name):
    module = importlib.import_module(home)
    assert name in getattr(module, "__all__", dir(module))
    assert name not in langgraph_compaction.__all__
    with pytest.raises(ImportError, match=name):
        exec(f"from langgraph_compaction import {name}", {})


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no_such_name"):
        langgraph_compaction.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from langgraph_compaction import no_such_name", {})


def test_dir_lists_the_public_names_and_leaves_out_the_helpers_and_the_building_blocks():
    listed = dir(langgraph_compaction)
    assert listed == sorted(set(listed))
    assert set(langgraph_compaction.__all__) <= set(listed)
    assert {"GATE", "estimate_tokens", "find_cutoff"}.isdisjoint(listed)
    assert [name for name in listed if name.startswith("_") and not name.startswith("__")] == []


def test_star_import_gives_exactly_the_listed_names():
    namespace: dict = {}
    exec("from langgraph_compaction import *", namespace)
    assert sorted(name for name in namespace if not name.startswith("__")) == langgraph_compaction.__all__


def test_importing_the_package_loads_no_front_and_no_langgraph():
    code = "import sys, langgraph_compaction; print(sorted(m for m in sys.modules if m.startswith('langgraph')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['langgraph_compaction']"


# --- every public callable documents its parameters in an ``Args:`` section (Google style, read by mkdocstrings)

_ARGS = ("Args", "Arguments", "Parameters")
_ITEM = re.compile(r"\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?:")


def documented_arguments(docstring: str | None, sections: tuple[str, ...] = _ARGS) -> list[str]:
    """Return the names the ``sections`` (``Args:``) of ``docstring`` describe, in order (``**kw`` as ``kw``)."""
    heading_line = re.compile(rf"^(\s*)(?:{'|'.join(sections)}):\s*$")
    lines = (docstring or "").splitlines()
    names: list[str] = []
    for at, line in enumerate(lines):
        heading = heading_line.match(line)
        if not heading:
            continue
        item_indent = None
        for entry in lines[at + 1 :]:
            if not entry.strip():
                continue
            indent = len(entry) - len(entry.lstrip())
            if indent <= len(heading.group(1)):
                break
            item_indent = indent if item_indent is None else item_indent
            match = _ITEM.match(entry) if indent == item_indent else None
            if match:
                names.append(match.group(1))
    return names


def signature_arguments(obj: Any) -> list[str] | None:
    """Return the parameters a caller passes to ``obj``; None when a caller does not call it with its own.

    Not called with parameters of its own: a protocol, a TypedDict (its keys are the state's, described in
    prose) and an exception that takes the message of the exception it derives from. A pydantic model's
    parameters are its fields; a field with a ``description`` (the settings, whose table is on the
    configuration page) or whose value is itself a model (documented by that model) needs no entry.
    """
    if isinstance(obj, type) and (getattr(obj, "_is_protocol", False) or typing.is_typeddict(obj)):
        return None
    if isinstance(obj, type) and issubclass(obj, BaseException):
        if not any(
            "__init__" in vars(klass) for klass in obj.__mro__ if klass.__module__.startswith("langgraph_compaction")
        ):
            return None
    if isinstance(obj, type) and issubclass(obj, pydantic.BaseModel):
        own = {
            name
            for klass in obj.__mro__
            if klass.__module__.startswith("langgraph_compaction")
            for name in getattr(klass, "__annotations__", {})
        }
        return [
            name
            for name, field in obj.model_fields.items()
            if name in own
            and not field.description
            and not (isinstance(field.annotation, type) and issubclass(field.annotation, pydantic.BaseModel))
        ]
    return [name for name in inspect.signature(obj).parameters if name not in ("self", "cls")]


def _public_callables() -> list[tuple[str, Any]]:
    found = []
    for module in (langgraph_compaction, testing):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value):
                found.append((f"{module.__name__}.{name}", value))
    return found


#: Public names defined in modules whose docstrings are still to gain their ``Args:`` section.
_PROSE_ONLY: set[str] = set()


@pytest.mark.parametrize(
    "name,value",
    [
        pytest.param(
            name,
            value,
            marks=[pytest.mark.xfail(strict=True, reason="its parameters are described in prose")]
            if name in _PROSE_ONLY
            else [],
        )
        for name, value in _public_callables()
    ],
    ids=[name for name, _ in _public_callables()],
)
def test_every_public_callable_documents_each_parameter_in_an_args_section(name, value):
    wanted = signature_arguments(value)
    if wanted is None:
        return
    fields = set(value.model_fields) if isinstance(value, type) and issubclass(value, pydantic.BaseModel) else None
    # a pydantic model's fields are its attributes as much as its parameters: mkdocstrings wants them under Attributes:
    documented = documented_arguments(inspect.getdoc(value), _ARGS + (("Attributes",) if fields is not None else ()))
    assert [arg for arg in wanted if arg not in documented] == [], f"{name}: give these an entry under Args:"
    known = fields if fields is not None else set(inspect.signature(value).parameters)
    assert [arg for arg in documented if arg not in known] == [], f"{name}: Args: names what it does not take"


def test_the_args_reader_reads_google_style_sections():
    docstring = """Do a thing.

    Args:
        first: The first.
        second (int): The second,
            on two lines: not_an_argument: here.
        **options: The rest.

    Returns:
        result: not an argument.
    """
    assert documented_arguments(inspect.cleandoc(docstring)) == ["first", "second", "options"]
    assert documented_arguments("No sections.") == []

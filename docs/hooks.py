"""MkDocs hooks: the pages that are generated when the site is built, so they cannot drift from the code.

- ``<!-- generated-at-build:config -->`` in a page becomes the table of every ``CompactionConfig`` setting,
  read from the pydantic model itself: its default, its meaning (the field's description) and how it stands
  against the original harness's defaults table.
- ``<!-- generated-at-build:api-rest -->`` becomes the API reference of every public name (``__all__``) that no
  other page of ``reference/`` documents, so a new public name is never missing from the reference.
- ``results/report.md`` is the committed benchmark report (``benchmarks/results/report.md``) with its plots; the
  pages link it where the repository keeps it (``../benchmarks/results/report.md``), which the site serves here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CONFIG_MARKER = "<!-- generated-at-build:config -->"
API_REST_MARKER = "<!-- generated-at-build:api-rest -->"
REFERENCE = ROOT / "docs" / "reference"

#: The settings the original harness's defaults table names (in snake_case, as the model spells them).
HARNESS_SETTINGS = {
    "trigger_messages",
    "trigger_tokens",
    "reserved",
    "fallback_trigger_tokens",
    "keep_messages",
    "keep_tokens",
    "keep_tokens_min",
    "keep_tokens_max",
    "keep_tokens_ratio",
    "flush_before_compact",
    "offload_before_compact",
    "truncate_args.trigger_messages",
    "truncate_args.trigger_tokens",
    "truncate_args.keep_messages",
    "truncate_args.max_arg_length",
    "truncate_args.keep_chars",
    "truncate_args.truncation_text",
    "prune.protect_tokens",
    "prune.minimum_tokens",
    "prune.max_output_chars",
    "prune.excluded_tools",
    "micro.enabled",
    "micro.keep_recent",
    "micro.min_chars",
    "token_counter",
}

#: Where a harness setting behaves differently here: the harness's value or rule, and why it changed.
DEVIATIONS = {
    "trigger_tokens": (
        "window − reserved; window / 2 only when that is ≤ 0",
        "the reserve takes at most half the window, so a 21k window still has a useful trigger",
    ),
    "trigger_messages": (
        "the count alone",
        "it also needs `guards.trigger_messages_min_tokens`: 400 one-line turns made 375 summaries without that floor",
    ),
    "keep_tokens": (
        "min(8,000, max(2,000, 0.25 × usable))",
        "under `prompt_cache` the derived tail is `keep_tokens_min`: the tail after a summary is billed in full "
        "once, then read from the cache; always capped so a summary and the tail fit `summary.target_ratio` "
        "of the trigger",
    ),
    "prune.excluded_tools": (
        "read_file, memory_search, memory_get, session_search",
        "`recall` is added: it is this package's retrieval tool",
    ),
    "micro.enabled": (
        "on, before every call",
        "off by default (`micro.enabled`), and clears in batches of `micro.minimum_tokens` so the prompt prefix "
        "does not change on every call",
    ),
    "token_counter": (
        "ceil(len / 2.5) per text",
        "that over-counts English and code by about 85 % and under-counts Chinese by about 45 %; the default "
        "estimator is fitted to o200k (`seed_estimate_tokens` counts at 2.5 characters a token)",
    ),
}


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if callable(value) and hasattr(value, "__name__"):
        return f"`{value.__name__}`"
    if isinstance(value, frozenset):
        return ", ".join(sorted(value))
    if isinstance(value, bool) or value is None:
        return f"`{value}`"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, str):
        return f"`{value!r}`"
    return f"`{value}`"


def config_rows() -> list[tuple[str, str, str, str]]:
    """Return (setting, default, meaning, standing) for every field of ``CompactionConfig``, nested ones dotted."""
    from pydantic import BaseModel

    from langgraph_compaction import CompactionConfig

    rows = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            dotted = prefix + name
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                walk(kind, dotted + ".")
                continue
            if dotted in DEVIATIONS:
                original, why = DEVIATIONS[dotted]
                standing = f"**differs** (harness: {original}): {why}"
            elif dotted in HARNESS_SETTINGS:
                standing = "as the harness"
            else:
                standing = "added here"
            meaning = (field.description or "").replace("|", "\\|").replace("\n", " ")
            # a narrow column would break a name mid-word (context_wi / ndow): the name keeps to one line
            name = f'<code style="white-space: nowrap">{dotted}</code>'
            rows.append((name, _default(field), meaning, standing))

    walk(CompactionConfig, "")
    return rows


def config_table() -> str:
    """Return the markdown table of every setting."""
    lines = ["| setting | default | meaning | against the original harness |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in config_rows()]
    return "\n".join(lines)


def undocumented_names() -> list[str]:
    """Return the public names (``__all__``) that no page of ``docs/reference/`` renders with ``:::``."""
    import langgraph_compaction

    documented = set()
    for page in REFERENCE.glob("*.md"):
        documented |= set(re.findall(r"^::: [\w.]+\.(\w+)$", page.read_text(encoding="utf-8"), re.MULTILINE))
    return [name for name in langgraph_compaction.__all__ if name not in documented]


def api_rest() -> str:
    """Return the reference of the public names the other reference pages leave out."""
    import langgraph_compaction

    parts = []
    for name in undocumented_names():
        value = getattr(langgraph_compaction, name)
        module = getattr(value, "__module__", "") if callable(value) else ""
        # functions and classes render from their docstrings; a constant has no module of its own to point at
        parts.append(f"::: {module}.{name}" if module.startswith("langgraph_compaction") else f"`{name}` = `{value!r}`")
    return "\n\n".join(parts) or "Every public name is on the pages above."


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    # pages link the report where the repository keeps it; the site serves its copy at results/
    markdown = markdown.replace("](../benchmarks/results/", "](results/")
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, config_table())
    if API_REST_MARKER in markdown:
        markdown = markdown.replace(API_REST_MARKER, api_rest())
    return markdown


def on_files(files: Files, config: Any) -> Files:
    """Add the committed benchmark report and its plots as ``results/``."""
    files.append(File.generated(config, "results/report.md", abs_src_path=str(RESULTS / "report.md")))
    for plot in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"results/{plot.name}", abs_src_path=str(plot)))
    return files

"""The layout shows the architecture: a pure core, storage, memory, the engine, and the fronts apart.

These are the rules a reader relies on when finding their way around the package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "langgraph_compaction"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, list[str]]]]:
    """Return, per module, the package modules it imports from and the names it takes."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = found.setdefault(name, [])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
                edges.append((target, [alias.name for alias in node.names]))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langgraph_compaction"):
                edges.append((node.module, [alias.name for alias in node.names]))
    return found


def test_the_core_imports_no_langgraph():
    core = sorted(_module_name(p) for p in (PACKAGE / "core").glob("*.py"))
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in core)
        + "print(sorted({m.split('.')[0] for m in sys.modules} & {'langgraph'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]", out.stdout
    assert len(core) >= 10


def test_each_layer_imports_only_the_layers_below_it():
    allowed = {
        "core": {"core"},
        "storage": {"core", "storage"},
        "memory": {"core", "storage", "memory"},
        "engine": {"core", "storage", "memory", "engine"},
        "fronts": {"core", "storage", "memory", "engine", "fronts"},
    }
    wrong = []
    for module, edges in _imports().items():
        layer = module.split(".")[1] if module.count(".") else None
        for target, _ in edges:
            parts = target.split(".")
            if (
                layer in allowed
                and len(parts) > 1
                and parts[1] in {"core", "storage", "memory", "engine", "fronts", "cli"}
            ):
                if parts[1] not in allowed[layer]:
                    wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_no_cycle_between_subpackages():
    """Each subpackage is a layer: none imports, even through others, a subpackage that imports it back."""
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    uses: dict[str, set[str]] = {name: set() for name in subpackages}
    for module, edges in _imports().items():
        source = module.split(".")[1] if module.count(".") else None
        for target, _ in edges:
            parts = target.split(".")
            if source in subpackages and len(parts) > 1 and parts[1] in subpackages and parts[1] != source:
                uses[source].add(parts[1])

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in uses[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    cycles = sorted(name for name in subpackages if name in reachable(name))
    assert cycles == [], {name: sorted(uses[name]) for name in cycles}


def test_no_import_cycles_and_no_private_names_across_modules():
    graph = {m: {t for t, _ in edges if t != m} for m, edges in _imports().items()}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in graph.get(node, ()):
            if nxt == path[0]:
                cycles.append(" -> ".join([*path, nxt]))
            elif nxt not in path and len(path) < 8:
                visit(nxt, [*path, nxt])

    for module in graph:
        visit(module, [module])
    private = [
        f"{module} takes {name} from {target}"
        for module, edges in _imports().items()
        for target, names in edges
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert cycles == [] and private == []


def test_every_import_of_the_package_names_one_of_its_modules():
    """An import of a module that moved must fail here, not resolve through an older installed copy."""
    missing = []
    for module, edges in _imports().items():
        for target, _ in edges:
            path = PACKAGE.parent.joinpath(*target.split("."))
            if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
                missing.append(f"{module} imports {target}")
    assert missing == []

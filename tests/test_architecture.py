"""The package's shape, read from its source with ``ast``: no import cycles, lower layers never import
higher ones, no module takes another module's private names, modules stay short, and every lazily
exported public name resolves."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bayesirt"
#: Layer of each top-level part of the package; a module may import only its own layer or lower ones.
LAYERS = {"errors": 0, "utils": 0, "data": 1, "models": 2, "inference": 3, "workflow": 4, "comparison": 4,
          "frequentist": 4, "structure": 4, "audit": 4, "safety": 4, "report": 5, "jobs": 6, "cli": 7, "__main__": 8}
MAX_LINES = 500
REASON = "longer than 500 lines because"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(name: str, path: Path):
    """(target module, imported name or None, line) of every import of a bayesirt module in ``path``,
    inside functions too; the lazy declarations under ``if TYPE_CHECKING:`` are not imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if _is_type_checking(node) for n in ast.walk(node)}
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "bayesirt":
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "bayesirt":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full, None, node.lineno) if full in MODULES else (base, alias.name, node.lineno)


def _owner(target: str) -> str:
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


EDGES = {name: sorted({(_owner(t), n, line) for t, n, line in _imports(name, path)}, key=lambda e: (e[0], e[1] or "", e[2]))
         for name, path in MODULES.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = {m: {t for t, _, _ in edges if t != m} for m, edges in EDGES.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lower_layers_never_import_higher_ones():
    upward = [f"{m} (layer {_layer(m)}) imports {t} (layer {_layer(t)}) at line {line}"
              for m, edges in EDGES.items() for t, _, line in edges
              if _layer(m) is not None and _layer(t) is not None and _layer(t) > _layer(m)]
    assert upward == []


def test_no_module_imports_another_modules_private_names():
    private = [f"{m} imports {name} from {t} at line {line}" for m, edges in EDGES.items() for t, name, line in edges
               if name and name.startswith("_") and not name.startswith("__") and t != m]
    assert private == []


def test_every_part_of_the_package_has_a_layer():
    top = {p.stem if p.is_file() else p.name for p in ROOT.iterdir() if p.name != "__pycache__"}
    assert top - {"__init__"} == set(LAYERS)
    assert len(top) <= 15


def test_modules_stay_short_or_say_why():
    long = [f"{m}: {n} lines" for m, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
            and REASON not in path.read_text(encoding="utf-8")[:3000].lower()]
    assert long == []


@pytest.mark.parametrize("package", sorted(m for m, p in MODULES.items() if p.name == "__init__.py"))
def test_every_public_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__doc__, f"{package} has no docstring saying what it is for"
    submodules = {m.rsplit(".", 1)[1] for m in MODULES if "." in m and m.rsplit(".", 1)[0] == package}
    # a public name equal to a submodule's is replaced by the submodule once that is imported
    assert not submodules & set(getattr(module, "__all__", [])), f"{package} exports names of its submodules"
    for name in getattr(module, "__all__", []):
        assert getattr(module, name) is not None

"""The house rules a newcomer relies on: no import cycle among runtime modules (imports inside
functions count: they only hide a cycle), and no module too long to read."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"app": "foresay.app", "engine": "foresay.engine", "audio": "foresay.audio", "ui": "foresay.ui"}
TRAINING = "foresay.engine.demo"  # training code: never imported by runtime code
MAX_LINES = 400


def runtime_modules() -> dict[str, Path]:
    modules = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if not name.startswith(TRAINING):
                modules[name] = path
    return modules


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of import nodes under `if TYPE_CHECKING:` (never executed)."""
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            hidden |= {id(n) for child in node.body for n in ast.walk(child)}
    return hidden


def imported_names(name: str, path: Path):
    tree = ast.parse(path.read_text())
    hidden = _type_checking_only(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in imported_names(name, path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from foresay.engine.x import A\n"
                      "def f():\n    from foresay.engine.y import B\n")
    assert set(imported_names("foresay.engine.m", module)) == {"typing", "typing.TYPE_CHECKING",
                                                               "foresay.engine.y", "foresay.engine.y.B"}


def test_no_import_cycle_among_runtime_modules():
    assert cycles(import_graph(runtime_modules())) == []


def test_runtime_code_never_imports_training_code():
    """(The benchmarks may: they render the demo domain's requests.)"""
    graph = import_graph({**runtime_modules(), TRAINING: ROOT / "engine" / "demo" / "__init__.py"})
    importers = sorted(name for name, edges in graph.items()
                       if TRAINING in edges and not name.startswith((TRAINING, "foresay.app.bench")))
    assert importers == []


def test_no_module_is_too_long_to_read():
    files = [p for folder in (*PACKAGES, "tests", "packaging") for p in (ROOT / folder).rglob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}

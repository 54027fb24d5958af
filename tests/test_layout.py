"""The package's layering: no import loops, counting the imports inside functions that
once hid them (models.py <-> nplm_lm.py, mixture.py, the trie's opener; corpus.py <->
stream.py), and each model family independent of the other."""

from __future__ import annotations

import ast
from pathlib import Path

import nnlm

ROOT = Path(nnlm.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the nnlm modules it imports anywhere in its source (function bodies and
    TYPE_CHECKING blocks included). ``from . import x`` imports x, not the package."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        here = name if package else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names]
                found = [s for s in subs if s in modules]
                if len(found) < len(subs) and target in modules:
                    found.append(target)  # names defined in the module itself
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names if a.name in modules]
            else:
                continue
            graph[name].update(f for f in found if f != name)
    return graph


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan 1972)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_finder_sees_a_loop_hidden_in_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert loops(graph) == [["a", "b", "c"]]
    assert loops({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    graph = import_graph()
    assert "nnlm.models" in graph["nnlm.experiments.mixing"]  # the scan reads imports
    assert loops(graph) == []


def test_the_model_families_do_not_import_each_other():
    graph = import_graph()
    for name, targets in graph.items():
        if name.startswith("nnlm.ngram"):
            assert not any(t.startswith("nnlm.neural") for t in targets), name
        if name.startswith("nnlm.neural"):
            assert not any(t.startswith("nnlm.ngram") for t in targets), name

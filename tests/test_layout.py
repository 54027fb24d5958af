"""The package's layering: no import loops, counting the imports inside functions that
once hid them (models.py <-> nplm_lm.py, mixture.py, the trie's opener; corpus.py <->
stream.py); each model family independent of the other; no room importing a room above
it, the command line on top, docs/architecture.md's drawing held to the code; and no
class or function grown past reading.

The rooms ("units") are what a reader sees in the tree: each folder, each module at the
package root, and a package's ``__init__`` that re-exports (its facade, a room of its
own at the top of its folder). A room's floor is one above the highest room it imports;
a room that imports one above it would make a loop, which the tests refuse."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import nnlm

ROOT = Path(nnlm.__file__).parent


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def imported_from(node: ast.ImportFrom, here: str) -> str:
    """The module a ``from X import ...`` in package ``here`` names (relative resolved)."""
    if not node.level:
        return node.module or ""
    base = here.split(".")[: len(here.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, set[str]]:
    """module -> the nnlm modules it imports anywhere in its source (function bodies and
    TYPE_CHECKING blocks included). ``from . import x`` imports x, not the package."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        here = name if package else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = imported_from(node, here)
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


# -- private names ------------------------------------------------------------------------
def private_names_crossing_folders(extra: dict | None = None) -> set[tuple[str, str, str]]:
    """(module, name, owner) for each private name (one underscore) that a module takes
    from a module in another folder, by ``from owner import _name`` or ``owner._name``:
    a folder's private names are its own, so that a change inside a folder (a storage
    layout's reader, say) stays there. ``extra``: modules to count as nnlm's (name ->
    (path, is a package)) without writing them into the package, which the other
    tests' workers read at the same time."""
    modules = {**_modules(), **(extra or {})}

    def folder(name):
        return name if modules[name][1] else name.rsplit(".", 1)[0]

    def private(name):
        return name.startswith("_") and not name.startswith("__")

    found = set()
    for name, (path, _) in modules.items():
        here = folder(name)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = imported_from(node, here)
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    owner = full if full in modules else target
                    if full in modules:
                        aliases[alias.asname or alias.name] = full
                    if owner in modules and private(alias.name) and folder(owner) != here:
                        found.add((name, alias.name, owner))
            elif isinstance(node, ast.Import):
                aliases.update({a.asname or a.name: a.name for a in node.names
                                if a.name in modules})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in aliases and private(node.attr):
                owner = aliases[node.value.id]
                if folder(owner) != here:
                    found.add((name, node.attr, owner))
    return found


def test_no_private_name_crosses_a_folder():
    assert private_names_crossing_folders() == set()


def test_the_private_name_finder_sees_both_forms(tmp_path, monkeypatch):
    """The finder is not vacuous: a module that takes another folder's private name, in
    either form, is found."""
    spy = tmp_path / "_spy_for_test.py"
    spy.write_text("from ..ngram.store.trie import _native\n"
                   "from ..ngram.store import trie\n"
                   "x = trie._lazy_thing\n", encoding="utf-8")
    found = private_names_crossing_folders({"nnlm.decoding._spy_for_test": (spy, False)})
    assert ("nnlm.decoding._spy_for_test", "_native", "nnlm.ngram.store.trie") in found
    assert ("nnlm.decoding._spy_for_test", "_lazy_thing", "nnlm.ngram.store.trie") in found


# -- rooms and floors ---------------------------------------------------------------------


def unit_of(name: str, modules) -> str:
    """The room of module ``name`` (see the module docstring)."""
    path, package = modules[name]
    if package:
        return f"{name}.__init__"
    parts = name.split(".")
    return name if len(parts) == 2 else ".".join(parts[:-1])


def unit_graph() -> dict[str, set[str]]:
    """room -> the rooms it imports; empty packages (a folder's docstring) are no room."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, targets in import_graph().items():
        unit = unit_of(name, modules)
        graph.setdefault(unit, set()).update(unit_of(t, modules) for t in targets)
    for unit in [u for u, targets in graph.items() if u.endswith(".__init__") and not
                 (targets - {u})]:
        graph.pop(unit)
    return {u: {t for t in targets if t in graph and t != u} for u, targets in graph.items()}


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    out: dict[str, int] = {}

    def floor(u):
        if u not in out:
            out[u] = 1 + max((floor(t) for t in graph[u]), default=0)
        return out[u]

    for u in graph:
        floor(u)
    return out


def test_no_room_imports_a_room_above_it():
    graph = unit_graph()
    assert {"nnlm.base", "nnlm.text", "nnlm.ngram.store", "nnlm.decoding"} <= set(graph)
    assert loops(graph) == [], "a room imports one above it (a loop between rooms)"


def test_the_command_line_stands_on_every_room():
    """The floors follow the design rather than a count: the command line (cli/, and
    ``python -m nnlm``) stands above every other room, since it only parses and
    dispatches; the bottom of the plan is base/ then text/; the n-gram models stand on
    their store and under their formats. How many floors that makes is whatever the
    rooms' imports make it (docs/architecture.md draws them, and the test above holds
    the drawing to the code)."""
    graph = unit_graph()
    assert loops(graph) == []
    level = floors(graph)
    top = {"nnlm.cli", "nnlm.cli.__init__", "nnlm.__main__"}
    highest = max(v for u, v in level.items() if u not in top)
    assert min(level[u] for u in top) > highest, sorted(level.items(), key=lambda kv: kv[1])
    assert level["nnlm.base"] == 1 and level["nnlm.text"] == 2  # the floor plan's bottom
    assert level["nnlm.ngram.store"] < level["nnlm.ngram"] < level["nnlm.ngram.formats"]


# -- sizes ----------------------------------------------------------------------------------
MAX_CLASS_LINES, MAX_FUNCTION_LINES = 300, 80
# what is still bigger, and why
LARGE = {
    "neural/training/train.py:Trainer": "given its parts, it keeps the loop, the epoch's "
    "end and the divergence policy (with the CUDA-graph losses' flush), and makes the "
    "typed view its scheme is given: 396 lines",
    "neural/nplm_lm.py:NeuralLM": "every way a network scores (float32, bf16, recurrent "
    "lines, a decoder's small batches, self-normalized); the short-list is ShortListLM",
    "ngram/backoff.py:BackoffNgram": "scoring, state minimization and the two storages' "
    "save and load in one class",
    "cli/neural.py:add_parsers": "nnlm train's flags, in argument groups: one list to read",
    "cli/ngram.py:add_parsers": "nnlm ngram's subcommands and their flags",
    "serve/app.py:create_app": "every endpoint, each a few lines, as FastAPI routes are",
    "ngram/distributed/estimate.py:estimate_kn": "the passes of one estimation, in order",
    "ngram/estimate/classes.py:exchange_clustering": "the exchange algorithm's one loop",
    "ngram/estimate/counts.py:count_ngrams": "counting with its memory-bounded spill path",
    "ngram/estimate/kneser_ney.py:fit": "modified Kneser-Ney's steps, in Chen & Goodman's "
    "order",
}


def test_no_class_or_function_is_past_reading_but_those_named():
    found = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else \
                MAX_FUNCTION_LINES if isinstance(node, (ast.FunctionDef,
                                                        ast.AsyncFunctionDef)) else None
            if limit and node.end_lineno - node.lineno + 1 > limit:
                found[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = \
                    node.end_lineno - node.lineno + 1
    assert set(found) <= set(LARGE), {k: v for k, v in found.items() if k not in LARGE}
    assert set(LARGE) <= set(found), "no longer large: take it off the list"


# -- hidden arrows --------------------------------------------------------------------------
# the library's modules that import nnlm's own modules inside functions, and why: each
# such import defers something heavy or keeps a process light; any other belongs at the
# top, where a reader sees the arrow (the command line, cli/, parses lazily by design)
LOCAL_IMPORTS = {
    "decoding/kenlm.py": "a trie file opens without numpy: the model, numpy and the "
    "store's numpy side load only when a file needs them",
    "model_files.py": "nnlm.kenlm's numpy-free opening reads headers through it",
    "ngram/store/query_spec.py": "a one-file model opens without the model directory's "
    "header reader (milliseconds of imports a process)",
    "text/jsonfiles.py": "likewise: the compression modules load with an error's message",
    "models.py": "each format's reader loads only for its files (numba's ARPA scanner)",
    "filter/buckets.py": "matplotlib (the neural extra) loads only to draw a histogram",
    "ngram/formats/arpa_read.py": "numba's scanner compiles with the first ARPA file",
    "ngram/estimate/methods.py": "each estimator loads with its first fit: the command "
    "line reads the registry at start-up",
    "ngram/estimate/kneser_ney.py": "pruning's counting loads numba",
    "ngram/estimate/counts.py": "the run merge (numba) loads only where runs spill",
    "ngram/distributed/run.py": "Dask loads only for a cluster",
    "fit.py": "nnlm.train loads torch only for a network, Dask only for a cluster",
    "neural/presets.py": "the presets are read without torch (the command line's choices)",
    "neural/optim/optimizers.py": "numba's compiled updates load where an optimizer uses them",
    "neural/nplm_lm.py": "the extras (open vocabulary, sentence embeddings) load when used; "
    "open_vocab builds this module's models",
    "serve/registry.py": "torch's runtime loads only for a neural model",
    "experiments/reproduce.py": "each row's family (torch for the networks) loads for it",
    "experiments/demo.py": "the demo's network trains with torch, loaded for it",
    "experiments/mixing.py": "torch's runtime loads only to place a mixture's networks",
}


def test_imports_inside_functions_are_only_where_they_defer_something():
    found = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("cli/"):
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(isinstance(n, ast.ImportFrom) and n.level > 0 for n in ast.walk(fn)):
                    found.add(rel)
    assert found <= set(LOCAL_IMPORTS), sorted(found - set(LOCAL_IMPORTS))
    assert set(LOCAL_IMPORTS) <= found, "no longer imports inside a function: take it off"


# -- the architecture page ------------------------------------------------------------------
ARCHITECTURE = ROOT.parent.parent / "docs" / "architecture.md"
ROOM_NAME = re.compile(r"[a-z_]+(?:/|\.py)")


def page_rooms(text: str) -> list[str]:
    """The rooms of docs/architecture.md's diagram, top to bottom, as paths under nnlm/
    ("ngram/store/", "neural/nplm_lm.py"): the names in its first column (a name indented
    under a folder is inside it)."""
    rooms, folder = [], None
    for line in text.split("```")[1].splitlines():
        first = ROOM_NAME.search(line)
        if not first or first.start() >= 20:  # a description's words, not a room
            continue
        cell = line[first.start():].split("  ")[0]
        inside = first.start() > 9 and folder is not None
        for name in (n.strip() for n in cell.split(",")):
            if not ROOM_NAME.fullmatch(name):
                continue
            rooms.append(folder + name if inside else name)
            if not inside:
                folder = name if name.endswith("/") else None
    return rooms


def drawn_above_what_they_import(rooms: list[str]) -> list[tuple[str, str]]:
    """(room, a room drawn below it that it imports, even through others), for rooms in
    the page's order; a folder's re-exporting ``__init__`` aside (a facade stands at the
    top of its folder)."""
    modules, graph = _modules(), import_graph()

    def members(room):
        dotted = "nnlm." + room.rstrip("/").removesuffix(".py").replace("/", ".")
        if room.endswith("/"):
            return {m for m in modules if (m == dotted or m.startswith(dotted + "."))
                    and not modules[m][1]}
        return {dotted} & set(modules)

    def reached(starts):
        seen, todo = set(), list(starts)
        while todo:
            for target in graph[todo.pop()]:
                if target not in seen and not modules[target][1]:
                    seen.add(target)
                    todo.append(target)
        return seen

    wrong = []
    for i, room in enumerate(rooms):
        assert members(room), f"docs/architecture.md names {room}, which is not in nnlm/"
        below = reached(members(room))
        wrong += [(room, later) for later in rooms[i + 1:]
                  if not (room.startswith(later) or later.startswith(room))
                  and below & members(later)]
    return wrong


def test_the_architecture_page_is_the_code():
    """docs/architecture.md's diagram claims that data flows down it: every room it names
    exists, and none imports a room drawn below it. Each path in its table of where to
    change things exists, and each name given with a path is defined there."""
    if not ARCHITECTURE.exists():
        pytest.skip("the docs are not beside the package (an installed copy)")
    text = ARCHITECTURE.read_text(encoding="utf-8")
    rooms = page_rooms(text)
    assert {"text/", "lm.py", "ngram/store/", "neural/training/", "models.py",
            "decoding/", "cli/"} <= set(rooms), rooms
    assert drawn_above_what_they_import(rooms) == []
    for row in text.split("## Where to change", 1)[1].splitlines():
        folder = ""  # a bare file name is in the folder of the path before it in its row
        for path, names in re.findall(
                r"`([\w/]+\.(?:py|h|c))`(?::\s*((?:`\w+`(?:, )?)+))?", row):
            path = path if "/" in path else folder + path
            folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
            assert (ROOT / path).exists(), f"docs/architecture.md: no nnlm/{path}"
            for name in re.findall(r"`(\w+)`", names or ""):
                assert re.search(rf"\b{name}\b",
                                 (ROOT / path).read_text(encoding="utf-8")), (path, name)


def test_the_page_check_sees_a_room_drawn_too_low():
    """Not vacuous: lm.py drawn below the n-gram models that stand on it is found, and so
    is the registry of models drawn below the decoders that open models through it."""
    assert ("ngram/", "lm.py") in drawn_above_what_they_import(["ngram/", "lm.py"])
    assert drawn_above_what_they_import(["decoding/", "models.py"]) == [
        ("decoding/", "models.py")]

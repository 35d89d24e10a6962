"""docs/architecture.md kept true where it can be checked: lgcexp's modules form the layers of its table (every
module in one row, no import running up a layer, no import cycle), function-level imports included (walked with
ast, so an import inside a function counts as much as one at the top); the three front ends go through
``lgcexp.stages.fit_on_graph``; the registries it names exist."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "lgcexp"
DOC = ROOT.parent / "docs" / "architecture.md"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the lgcexp modules it imports anywhere in its body (``from .x import y`` counts as an
    import of ``x``, or of ``x.y`` when that is a module; a package's ``__init__`` is the package)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
                deps |= {t for t in targets if t in modules}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod.startswith("lgcexp"):
                    continue
                found = False
                for a in node.names:
                    sub = f"{mod}.{a.name}"
                    if sub in modules:
                        deps.add(sub)
                        found = True
                if mod in modules and (not found or any(f"{mod}.{a.name}" not in modules for a in node.names)):
                    deps.add(mod)
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_walker_finds_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


# ---- the layer table of docs/architecture.md --------------------------------------------------------------

def layer_table(text: str) -> list[tuple[int, str, list[str]]]:
    """(layer number, name, module patterns) of each row of the table under "What may import what"."""
    section = text.split('<a id="layers"></a>', 1)[1]
    rows = []
    for number, name, cell in re.findall(r"^\| (\d+) \| ([^|]+) \| ([^|]+) \|$", section, re.M):
        rows.append((int(number), name.strip(), re.findall(r"`([a-z_.*]+)`", cell)))
    return rows


def place_modules(rows: list[tuple[int, str, list[str]]], modules: set[str]) -> dict[str, int]:
    """module -> its layer: a row naming the module itself wins over a ``pkg.*`` pattern, and a longer
    pattern over a shorter one. Raises where a module has no row or two rows claim it equally."""
    placed: dict[str, tuple[int, int]] = {}  # module -> (specificity, layer)
    for layer, _, patterns in rows:
        for pat in patterns:
            if pat.endswith(".*"):
                base = pat[:-2]
                hits = {m for m in modules if m == base or m.startswith(base + ".")}
                spec = len(base.split("."))
            else:
                hits = {pat} & modules
                spec = 100
                assert hits, f"docs/architecture.md's layer table names {pat}, which is not a module of lgcexp"
            for m in hits:
                if m in placed and placed[m][0] == spec:
                    raise AssertionError(f"{m} is in layers {placed[m][1]} and {layer}")
                if m not in placed or placed[m][0] < spec:
                    placed[m] = (spec, layer)
    missing = sorted(modules - set(placed))
    assert not missing, f"modules in no layer of docs/architecture.md: {missing}"
    return {m: layer for m, (_, layer) in placed.items()}


def upward_imports(graph: dict[str, set[str]], layer: dict[str, int]) -> list[str]:
    return sorted(f"{m} (layer {layer[m]}) imports {d} (layer {layer[d]})"
                  for m, deps in graph.items() for d in deps if layer[d] > layer[m])


def test_the_table_parser_and_the_rule_catch_what_they_should():
    text = ('<a id="layers"></a>\n| layer | name | modules |\n|---|---|---|\n'
            '| 1 | low | `a.b`, `a.c.*` |\n| 2 | high | `a.c.d`, `a` |\n')
    rows = layer_table(text)
    assert rows == [(1, "low", ["a.b", "a.c.*"]), (2, "high", ["a.c.d", "a"])]
    layer = place_modules(rows, {"a", "a.b", "a.c", "a.c.d", "a.c.e"})
    assert layer == {"a": 2, "a.b": 1, "a.c": 1, "a.c.d": 2, "a.c.e": 1}
    assert upward_imports({"a.c.e": {"a.c.d", "a.b"}, "a.c.d": {"a.c.e"}}, layer) == [
        "a.c.e (layer 1) imports a.c.d (layer 2)"]
    with pytest.raises(AssertionError, match="in no layer"):
        place_modules(rows, {"a", "a.b", "a.c.d", "x"})
    with pytest.raises(AssertionError, match="not a module"):
        place_modules(rows, {"a", "a.c"})


def test_every_module_is_in_one_layer_and_no_import_runs_up():
    graph = import_graph()
    rows = layer_table(DOC.read_text(encoding="utf-8"))
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1)), "layers are numbered 1, 2, ... in order"
    layer = place_modules(rows, set(graph))
    bad = upward_imports(graph, layer)
    assert not bad, "imports against docs/architecture.md's layer table:\n" + "\n".join(bad)


def test_the_algorithms_take_only_the_judgement_record_from_the_issue_wing():
    graph = import_graph()
    taken = {d for m, deps in graph.items() if m.startswith("lgcexp.algorithms") for d in deps
             if d.startswith("lgcexp.issues")}
    assert taken == {"lgcexp.issues.judgement"}


def _calls(module: str, name: str) -> bool:
    path = ROOT.parent / (module.replace(".", "/") + ".py")
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name):
                return True
    return False


@pytest.mark.parametrize("front_end", ["lgcexp.pipeline", "lgcexp.sklearn", "lgcexp.issues.find"])
def test_every_front_end_goes_through_fit_on_graph(front_end):
    assert "lgcexp.stages" in import_graph()[front_end]
    assert _calls(front_end, "fit_on_graph")


def test_the_registries_the_page_names_exist():
    import importlib

    from lgcexp.registry import Registry

    text = DOC.read_text(encoding="utf-8")
    named = re.findall(r"^\| `(lgcexp\.[a-z]+)\.([A-Z_]+)` \| `([a-z]+)=` \| `([a-z_.]+)\.([A-Za-z]+)` \|", text, re.M)
    assert len(named) == 5
    for module, attr, group, base_module, base in named:
        registry = getattr(importlib.import_module(module), attr)
        assert isinstance(registry, Registry) and registry.group == group
        base_cls = getattr(importlib.import_module(base_module), base)
        for name in registry.names():
            assert issubclass(registry.get(name), base_cls), (group, name)


def test_the_issue_wing_is_built_bottom_up_as_its_docstring_lists():
    """lgcexp/issues/__init__.py lists its modules bottom up: each imports only those listed before it."""
    import lgcexp.issues

    order = re.findall(r"^- :mod:`\.([a-z_]+)`", lgcexp.issues.__doc__, re.M)
    assert sorted(order) == sorted(p.stem for p in (ROOT / "issues").glob("*.py") if p.stem != "__init__")
    graph = import_graph()
    for i, name in enumerate(order):
        inside = {d.rpartition(".")[2] for d in graph[f"lgcexp.issues.{name}"] if d.startswith("lgcexp.issues.")}
        late = sorted(inside - set(order[:i]))
        assert not late, f"lgcexp.issues.{name} imports {late}, listed after it"


def test_no_module_re_exports_names_it_does_not_use():
    """docs/architecture.md#names-kept-for-a-reason: no name kept importable for old callers. A re-export
    shows as an unused import silenced with ``noqa: F401``; only the package root's ``__version__`` is."""
    silenced = [(p.relative_to(ROOT.parent).as_posix(), line.strip()) for p in sorted(ROOT.rglob("*.py"))
                for line in p.read_text().splitlines() if "noqa: F401" in line]
    assert silenced == [("lgcexp/__init__.py", "from .version import __version__  # noqa: F401")], silenced

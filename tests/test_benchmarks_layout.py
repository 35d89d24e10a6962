"""benchmarks/ and scripts/ keep to their layout: no file edits ``sys.path`` or uses a private lgcexp name (an
underscore name of lgcexp, imported or reached as an attribute), ``python -m benchmarks --list`` names every
benchmark module, every benchmark imports and answers ``--help``, every user script answers ``--help``, and the
wheel holds every lgcexp package but not the benchmarks."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])
BENCHMARKS = sorted(p.stem for p in ROOT.glob("benchmarks/*.py") if p.stem not in ("__init__", "__main__", "common"))
SCRIPTS = sorted(ROOT.glob("scripts/*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def layout_faults(source: str) -> list[str]:
    """What in ``source`` breaks the layout: each ``sys.path`` use, each private lgcexp name imported
    (``from lgcexp.x import _y``, ``import lgcexp._x``), and each ``<lgcexp name>._y`` attribute."""
    tree = ast.parse(source)
    faults: list[str] = []
    from_lgcexp: set[str] = set()   # names bound to lgcexp or to something imported from it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "lgcexp":
                    if any(_private(part) for part in a.name.split(".")):
                        faults.append(f"line {node.lineno}: import {a.name}")
                    from_lgcexp.add(a.asname or "lgcexp")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lgcexp" and not node.level:
            for a in node.names:
                if any(_private(part) for part in node.module.split(".")) or _private(a.name):
                    faults.append(f"line {node.lineno}: from {node.module} import {a.name}")
                from_lgcexp.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                faults.append(f"line {node.lineno}: sys.path")
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if _private(node.attr) and isinstance(root, ast.Name) and root.id in from_lgcexp:
                faults.append(f"line {node.lineno}: {ast.unparse(node)}")
    return sorted(faults, key=lambda f: int(f.split(":")[0].split()[1]))


def test_the_check_finds_what_it_looks_for():
    bad = """
import sys
import lgcexp.solvers.diagonal as loo_mod
from lgcexp.issues import out_of_fold as oo
from lgcexp.solvers.diagonal import _prepare, propagation_diagonal
from lgcexp.solvers import cg
sys.path.insert(0, "scripts")
oo._pca_axes(1, 2, 3)
loo_mod._solve
cg.numba_passes.__doc__
propagation_diagonal.__name__
"""
    found = layout_faults(bad)
    assert [f.split(":")[0] for f in found] == ["line 5", "line 7", "line 8", "line 9"], found
    assert layout_faults("from lgcexp.solvers.cg import cg\nimport os\nos.path.join('a')\n") == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_sys_path_edit_nor_private_lgcexp_name(path):
    assert layout_faults(path.read_text(encoding="utf-8")) == []


def test_list_names_every_benchmark_module():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], capture_output=True, text=True, cwd=ROOT,
                          check=True, timeout=60)
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert listed == BENCHMARKS
    assert all(len(line.split(maxsplit=1)) == 2 for line in proc.stdout.splitlines())   # each with its summary


def test_make_bench_runs_the_runner():
    recipe = (ROOT / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "$(PYTHON) -m benchmarks report" in recipe


def test_an_unknown_benchmark_is_refused_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "no_such"], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("python -m benchmarks: no benchmark 'no_such'; choose one of autod")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_imports_and_answers_help(name, capsys):
    mod = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_user_script_answers_help(path):
    proc = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:")


def test_the_wheel_holds_every_lgcexp_package_and_not_the_benchmarks():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.glob("lgcexp/**/__init__.py")}
    assert on_disk <= listed, on_disk - listed
    assert not any(name.split(".")[0] in ("benchmarks", "scripts") for name in listed)

"""The repository is self-contained: citations of docs/fidelity.md point at anchors that exist, and nothing
cites notes that live outside the repository."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = [p for pattern in ("lgcexp/**/*.py", "tests/*.py", "scripts/*.py", "benchmarks/*.py", "conf/**/*.yaml", "*.md",
                           "docs/*.md", "Makefile", "pyproject.toml") for p in ROOT.glob(pattern)]


def _anchors() -> set[str]:
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")))


def test_fidelity_citations_resolve():
    anchors = _anchors()
    cited = {}
    for path in FILES:
        for anchor in re.findall(r"fidelity\.md#([A-Za-z0-9_-]+)", path.read_text(encoding="utf-8")):
            cited.setdefault(anchor, []).append(path.relative_to(ROOT).as_posix())
    assert cited, "nothing cites docs/fidelity.md"
    missing = {a: files for a, files in cited.items() if a not in anchors}
    assert not missing, f"citations of anchors that docs/fidelity.md lacks: {missing}"
    local = set(re.findall(r"\]\(#([a-z0-9-]+)\)", (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")))
    assert local <= anchors, local - anchors


def test_no_citation_outside_the_repository():
    this = Path(__file__).resolve()
    bad = [p.relative_to(ROOT).as_posix() for p in FILES if p.resolve() != this
           and re.search(r"reference[- ]notes|notes §|shared/docs", p.read_text(encoding="utf-8"))]
    assert not bad, bad


def test_docs_index_lists_every_anchor():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    assert set(re.findall(r"^\| `([a-z0-9-]+)` \|", index, re.M)) == _anchors()

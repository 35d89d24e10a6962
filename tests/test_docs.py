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


# ---- the README and docs/: links alive, the index complete, every method named ----------------------------

PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are examples, not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = text.replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found = set(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+?)\s*#*$", text, re.M):
        s = slug(heading)
        found.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return found


def links(path: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(path.read_text(encoding="utf-8")))


def test_slug_is_githubs():
    assert slug("One P_LL solve per labelled set (`pll_alphas`)") == "one-p_ll-solve-per-labelled-set-pll_alphas"
    assert slug("Features: the representation the graph is built on") == \
        "features-the-representation-the-graph-is-built-on"
    assert slug("Low-label methods: Poisson learning and the 1-5 labels per class protocol") == \
        "low-label-methods-poisson-learning-and-the-1-5-labels-per-class-protocol"


def test_every_relative_link_and_anchor_resolves(tmp_path):
    # the checker itself: a dead file, a dead anchor and a live pair
    (tmp_path / "a.md").write_text("# Top\n## Two words\n[x](b.md) [y](#two-words) [z](#nope) [w](a.md#top)\n"
                                   "```\n[in code](gone.md)\n```\n")
    assert dead_links(tmp_path / "a.md") == ["b.md", "#nope"]
    bad = {p.relative_to(ROOT).as_posix(): dead for p in PAGES if (dead := dead_links(p))}
    assert not bad, f"dead links: {bad}"


def dead_links(path: Path) -> list[str]:
    dead = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            dead.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            dead.append(target)
    return dead


def test_docs_index_lists_every_docs_file():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([A-Za-z0-9_.-]+)\)", index))
    files = {p.name for p in (ROOT / "docs").iterdir() if p.is_file() and p.name != "README.md"}
    assert files - listed == set(), f"docs/README.md does not list {sorted(files - listed)}"


def test_readme_is_short_and_starts_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    first = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].startswith("python3 -m venv .venv && . .venv/bin/activate && make install && lgcexp ")
    assert first[1].startswith(". .venv/bin/activate && make test ")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^install:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make install" in (ROOT / ".ci" / "run").read_text() and "make test" in (ROOT / ".ci" / "run").read_text()


def _block(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    return text.split(f"<!-- {name} -->\n", 1)[1].split(f"<!-- /{name} -->", 1)[0]


def test_readme_names_every_method_in_the_registry_order():
    from lgcexp.algorithms import ALGORITHMS

    rows = re.findall(r"^\| `([A-Za-z_]+)` \|", _block(ROOT / "README.md", "methods"), re.M)
    assert rows == list(ALGORITHMS.names())


def test_usage_names_every_method():
    from lgcexp.algorithms import ALGORITHMS

    usage = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    row = re.search(r"^\| `algo=` \|(.*)$", usage, re.M).group(1)
    assert set(ALGORITHMS.names()) <= set(re.findall(r"`([A-Za-z_]+)`", row))


def estimator_rows() -> str:
    """The estimator table of docs/api.md, as the registry makes it."""
    from lgcexp.algorithms import ALGORITHMS
    from lgcexp.sklearn import ESTIMATORS

    rows = ["| `algo=` | estimator | algorithm class |", "|---|---|---|"]
    for name, est in ESTIMATORS.items():
        cls = ALGORITHMS.get(name)
        rows.append(f"| `{name}` | `{est.__name__}` | `{cls.__module__}.{cls.__name__}` |")
    return "\n".join(rows) + "\n"


def test_api_lists_every_estimator_as_the_registry_makes_them():
    from lgcexp.algorithms import ALGORITHMS
    from lgcexp.sklearn import ESTIMATORS

    assert list(ESTIMATORS) == list(ALGORITHMS.names())
    assert _block(ROOT / "docs" / "api.md", "estimators") == estimator_rows(), \
        "docs/api.md's estimator table differs from the registry; the expected table:\n" + estimator_rows()


def _documented_commands() -> list[tuple[str, str]]:
    """(page, command line) of every ``lgcexp ...`` line in a bash block of the README and docs/, but for
    placeholders (``...``, the reader's own files ``mine*``), a plug-in's search path and the Slurm launcher
    (they need what the reader has)."""
    import shlex

    out = []
    for path in PAGES:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0].strip()
                if (line.startswith("lgcexp ") and "..." not in line and "=mine" not in line
                        and "hydra.searchpath" not in line
                        and "hydra/launcher=slurm" not in line):
                    out.append((path.relative_to(ROOT).as_posix(), shlex.split(line)[1:]))
    return out


def test_documented_commands_pass_the_preflight(monkeypatch, tmp_path):
    from lgcexp.cli import preflight

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LGCEXP_OUTPUT_DIR", str(tmp_path / "out"))
    commands = _documented_commands()
    assert len([c for c in commands if c[0] == "README.md"]) >= 3
    for page, args in commands:
        try:
            preflight(args)
        except Exception as exc:  # noqa: BLE001 (the page and the line are what a reader needs)
            raise AssertionError(f"{page}: lgcexp {' '.join(args)} -> {exc}") from None

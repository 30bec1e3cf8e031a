"""The README is a front page whose set-up commands others rely on: `.ci/run` runs its test
command verbatim, and a newcomer copies its first command. Every link in it and in docs/ leads
somewhere that exists, anchors included."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SERVE = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/grader serve"
TEST = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q"


def commands(text: str) -> list[str]:
    """The indented (code block) lines, in order."""
    return [line.strip() for line in text.splitlines() if line.startswith("    ") and line.strip()]


def test_the_readme_opens_with_the_serve_and_test_commands():
    assert commands(README.read_text())[:2] == [SERVE, TEST]


def test_ci_runs_the_readmes_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == TEST


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.M)}


def test_every_link_in_the_readme_and_docs_resolves():
    broken = []
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"https?://", target):
                continue
            file, _, fragment = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists() or (fragment and dest.suffix == ".md" and fragment not in anchors(dest)):
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_each_audience_has_its_page_linked_from_the_front_page():
    text = README.read_text()
    for page in ("students", "staff", "operators", "contributors"):
        assert f"(docs/{page}.md)" in text and (ROOT / "docs" / f"{page}.md").exists()
    assert len(text.splitlines()) < 60          # a front page, not the manual


def test_each_slow_prefix_still_names_a_test():
    """A renamed module must not drop silently out of the slow list and into the fast subset."""
    from fast_subset import SLOW
    for prefix in SLOW:
        path = ROOT / prefix.split("::")[0]
        assert path.exists(), prefix
        if "::" in prefix:
            assert f"def {prefix.split('::')[1].split('[')[0]}" in path.read_text(), prefix

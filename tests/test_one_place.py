"""Knowledge written once (issue 21's "Why": the 1.2 threshold factor twice, the
reference-to-tier map twice, three extra TOML readers, Assignment built from a spec in six
places). Each is now in one module; this fails, naming file and line, on a second copy."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("grader", "store", "workers", "web", "service")
# SQL that picks a student's best run: a total ranked or maximised (web/standings.py had its own)
BEST_RUN_SQL = re.compile(r"(?is)(order by[^;]*score_total\s+desc|max\(\s*\w*\.?score_total\s*\))")


def nodes():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in rel:
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
                    yield rel, node


def _imports(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        return [(node.module or "").split(".")[0]]
    return []


FINDERS = {
    # the course's factor between a reference's p99 and its threshold: grader.vocabulary.THRESHOLD_FACTOR
    "the 1.2 threshold factor": (lambda n: isinstance(n, ast.Constant) and type(n.value) is float and n.value == 1.2,
                                 {"grader/vocabulary.py"}),
    # which reference kernel stands for which tier: grader.references
    "a reference kernel's name": (lambda n: isinstance(n, ast.Constant) and n.value in ("conv2d_optimized",
                                                                                         "conv2d_relaxed"),
                                  {"grader/references.py"}),
    # a spec is read from TOML by grader.spec.from_toml alone
    "a TOML reader": (lambda n: bool({"tomllib", "tomli", "toml"} & set(_imports(n))), {"grader/spec.py"}),
    # an assignment is made from a stored spec by store.specs.new_assignment alone
    "an Assignment built": (lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                            and n.func.id == "Assignment", {"store/specs.py"}),
    # which run counts (highest total, then p99 sum, then earliest): store.runs.best_runs, one query
    "a best-run query": (lambda n: isinstance(n, ast.Constant) and isinstance(n.value, str)
                         and bool(BEST_RUN_SQL.search(n.value)), {"store/runs.py"}),
}


@pytest.mark.parametrize("what", sorted(FINDERS))
def test_written_in_one_place(what):
    found, home = FINDERS[what]
    places = sorted({f"{rel}:{node.lineno}" for rel, node in nodes() if found(node)})
    assert places and all(p.split(":")[0] in home for p in places), f"{what} belongs in {home} only: {places}"


def test_the_finders_see_a_second_copy():
    copy = ast.parse("import tomllib\nLIMIT = 1.2 * p99\nkernel = 'conv2d_relaxed'\na = Assignment(spec_name='x')\n"
                     "SQL = 'SELECT * FROM b ORDER BY b.score_total DESC, b.p99_sum ASC'\n")
    seen = {what for what, (found, _) in FINDERS.items() for node in ast.walk(copy) if found(node)}
    assert seen == set(FINDERS)


def test_the_service_never_writes_a_spec_to_a_temporary_file():
    """Finding: a spec travelled TOML -> database -> temporary file -> load_spec. Workers and web
    load a stored spec from its text (store.specs); none of them needs a temporary file (`grader
    serve`'s control socket in service/ may)."""
    places = sorted(f"{rel}:{node.lineno}" for rel, node in nodes()
                    if rel.split("/")[0] in ("store", "workers", "web") and "tempfile" in _imports(node))
    assert places == [], "load a stored spec with store.specs (spec_of, spec_by_hash)"

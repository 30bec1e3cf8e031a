"""`grader grade FILE --assignment FOLDER` (issue 45): a problem folder given where a spec goes
grades under the folder's own tests, the spec `grader problem check` grades its solutions with;
and the bundled matmul folder's timing-distinguishing wrong kernel, which that check must show
earns nothing it should not (and reaches the timed test it should be caught by)."""
from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest
from nkisim.dialects import CURRENT, LEGACY

from grader import cli, problems
from grader import spec as specs
from grader.problems import check as checks
from grader.problems import folder as folders

from test_problem_folders import SOLUTIONS, run_cli, write_folder

ROOT = Path(__file__).resolve().parents[2]
MATMUL = problems.BUNDLED_DIR / "matmul"
KERNELS = {LEGACY.name: ROOT / "reference_kernels" / "matmul.py",
           CURRENT.name: ROOT / "reference_kernels" / "nki06" / "matmul.py"}
TIMED_SHAPES = {LEGACY.name: ROOT / "reference_kernels" / "wrong" / "matmul_timed_shapes.py",
                CURRENT.name: ROOT / "reference_kernels" / "nki06" / "wrong" / "matmul_timed_shapes.py"}


def as_submission(source: Path, tmp_path: Path, name: str = "matmul.py") -> Path:
    path = tmp_path / name
    shutil.copyfile(source, path)
    return path


def graded(capsys, tmp_path, submission: Path, assignment: str) -> tuple[int, dict, str]:
    out = tmp_path / "report.json"
    status, terminal, err = run_cli(capsys, "grade", str(submission), "--assignment", assignment, "--backend", "sim",
                                    "--seed", "5", "--json", str(out))
    return status, (json.loads(out.read_text()) if out.exists() else {}), terminal + err


@pytest.mark.parametrize("dialect", sorted(KERNELS))
def test_a_bundled_folder_grades_the_reference_under_its_own_tests(dialect, tmp_path, capsys):
    status, report, said = graded(capsys, tmp_path, as_submission(KERNELS[dialect], tmp_path), str(MATMUL))
    assert status == cli.EXIT_OK, said
    loaded = folders.load(MATMUL, bundled=True)
    assert report["assignment"] == "problem-matmul"
    assert report["dialect"] == dialect                       # the submitted file's, which the folder accepts
    assert [t["name"] for t in report["tests"]] == [t["name"] for t in loaded.tests]
    assert report["score"]["correctness"] == 2 and report["score"]["performance"] == 2
    assert report["problem_hashes"] == {"matmul": problems.get("matmul").sha256}
    # the very spec `grader problem check` grades the folder's solutions with
    assert report["spec_hash"] == checks.spec_for(loaded, dialect).spec_hash


def test_a_broken_zero_one_hint_is_the_kernels_error_not_the_graders(tmp_path, capsys):
    """nc_matmul(is_moving_onezero=True) on a moving operand of other values is caught only when
    the trusted executor runs the program on its values: it is the kernel's error in its tests
    (with its line and the fix), and the grade completes."""
    source = KERNELS[CURRENT.name].read_text()
    hinted = source.replace("moving=b_sb[", "is_moving_onezero=True, moving=b_sb[", 1)
    assert hinted != source
    submission = tmp_path / "matmul.py"
    submission.write_text(hinted)
    status, report, said = graded(capsys, tmp_path, submission, str(MATMUL))
    assert report["status"] == "completed", said
    correctness = [t for t in report["tests"] if t["kind"] == "correctness"]
    assert correctness and all(t["status"] == "error" for t in correctness)
    assert all("is_moving_onezero=True" in t["message"] and "matmul.py:" in t["message"]
               and "fix: drop is_moving_onezero=True" in t["message"] for t in correctness)


def test_every_way_of_naming_the_folder_is_the_same_spec(tmp_path):
    kernel = str(KERNELS[LEGACY.name])
    spec = cli.assignment_spec(str(MATMUL), kernel)
    for other in ("matmul", str(MATMUL / "problem.toml"), str(MATMUL) + "/"):
        assert cli.assignment_spec(other, kernel).spec_hash == spec.spec_hash, other
    assert cli.assignment_spec("asst4-trainium2", kernel).assignment == "asst4-trainium2"     # a spec stays a spec
    # an archive names no dialect up front: the folder's first, and the static check says the rest
    archive = tmp_path / "hw.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(KERNELS[CURRENT.name], arcname="matmul.py")
    assert cli.assignment_spec(str(MATMUL), str(archive)).dialect == folders.load(MATMUL, bundled=True).problem.dialects[0]


def test_a_course_folder_grades_by_its_path(tmp_path, capsys):
    course = write_folder(tmp_path / "course")
    submission = tmp_path / "scaled_add.py"
    submission.write_text(SOLUTIONS["correct/tiles.py"])
    status, report, said = graded(capsys, tmp_path, submission, str(course))
    assert status == cli.EXIT_OK, said
    assert report["problem_hashes"] == {"scaled-add": folders.folder_hash(course)}
    assert report["score"]["correctness"] == 2 and report["score"]["performance"] == 2


def test_a_folder_without_problem_toml_is_refused_with_what_to_give(tmp_path, capsys):
    submission = as_submission(KERNELS[LEGACY.name], tmp_path)
    empty = tmp_path / "not-a-problem"
    empty.mkdir()
    status, _, said = graded(capsys, tmp_path, submission, str(empty))
    assert status == cli.EXIT_BAD_INPUT
    assert "is a folder without problem.toml" in said and "a spec .toml file" in said


def test_other_commands_taking_a_spec_say_how_to_name_a_folder():
    with pytest.raises(specs.SpecError) as raised:
        specs.load(str(MATMUL))
    assert "is a folder, not a spec file" in raised.value.reason
    assert "--assignment FOLDER" in raised.value.remedy and 'problem = "' in raised.value.remedy


def test_problem_check_takes_a_bundled_problems_name(capsys):
    assert cli.problem_folder("matmul") == MATMUL
    assert cli.problem_folder(str(MATMUL / "problem.toml")) == MATMUL
    assert cli.problem_folder("asst4-trainium2") is None                      # a bundled spec's name
    status, out, err = run_cli(capsys, "problem", "check", "transpose")
    assert status == 0 and "0 surprises" in out, out + err


# ----- the timing-distinguishing wrong kernel ---------------------------------------------------

@pytest.mark.parametrize("dialect", sorted(TIMED_SHAPES))
def test_a_kernel_honest_only_on_the_published_shapes_earns_no_timed_point(dialect, tmp_path, capsys):
    """It is the reference on the correctness tests' shapes and does half the matmuls on any other:
    it passes both correctness tests, and its benchmark output is checked and found wrong."""
    status, report, said = graded(capsys, tmp_path, as_submission(TIMED_SHAPES[dialect], tmp_path), str(MATMUL))
    assert status == cli.EXIT_OK, said
    tests = {t["name"]: t for t in report["tests"]}
    assert tests["matmul_float32"]["status"] == tests["matmul_half"]["status"] == "passed"
    timed = tests["perf_matmul_512"]
    assert timed["points"] == 0 and "performance run output is wrong" in timed["message"], timed


def test_problem_check_shows_the_timed_cheat_reached_its_benchmark_and_failed_it(capsys):
    status, out, err = run_cli(capsys, "problem", "check", str(MATMUL))
    assert status == 0, out + err
    rows = [line for line in out.splitlines() if "matmul_timed_shapes.py" in line]
    assert len(rows) == 2 and all(r.startswith("ok") for r in rows), rows
    assert all("correctness 2/2, performance 0/2" in r for r in rows), rows


def test_a_may_pass_solution_that_fails_what_it_may_pass_is_a_surprise(tmp_path, capsys):
    """A 'wrong only when timed' kernel that is wrong everywhere never reaches the timed tests, so
    its row would show nothing about them: the check says so instead of passing it."""
    course = write_folder(tmp_path, **{"solutions/wrong/timed_shapes.py": SOLUTIONS["wrong/empty.py"]})
    status, out, err = run_cli(capsys, "problem", "check", str(course))
    assert status == 1, out + err
    [row] = [line for line in out.splitlines() if "wrong/timed_shapes.py" in line]
    assert row.startswith("SURPRISE") and "small error (may_pass names it)" in row, row

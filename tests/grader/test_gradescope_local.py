"""The Gradescope autograder in local mode, exactly as Gradescope runs it: the zip built by
`grader gradescope build`, unpacked to ROOT/source, setup.sh run there into a fresh virtual
environment (from the zip's own wheel and pinned requirements), run_autograder copied to ROOT
and run from ROOT. Every results.json is checked against Gradescope's documented format."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from gradescope_helpers import (OPTIMIZED, REPO, SMALL_SPEC, TRANSPOSE, GradescopeRoot, asst4_tar, build,
                                system_python)
from grader.gradescope import results as gs_results

SPINNING = b'''import neuronxcc.nki as nki

@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    while True:
        pass
'''


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """ROOT with the grader installed by setup.sh from a freshly built zip."""
    zips = tmp_path_factory.mktemp("zips")
    place = GradescopeRoot()
    zip_path = zips / "autograder.zip"
    build(zip_path, "--assignment", str(SMALL_SPEC), "--mode", "local", "--fixed-seed")
    place.unpack(zip_path)
    place.setup()
    place.zips = zips
    yield place
    place.remove()


def valid(results: dict) -> dict:
    assert gs_results.problems(results) == []
    return results


def config_of(place) -> dict:
    return json.loads((place.path / "source" / "nki_gradescope.json").read_text())


def grade_json(tmp_path, upload_name: str, data: bytes, seed: int) -> dict:
    """`grader grade --json` on the same upload and seed."""
    path = tmp_path / upload_name
    path.write_bytes(data)
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(path), "--assignment", str(SMALL_SPEC),
                           "--seed", str(seed), "--backend", "sim", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_the_zip_holds_what_gradescope_runs(tmp_path):
    out = tmp_path / "autograder.zip"
    done = build(out, "--assignment", str(SMALL_SPEC), "--mode", "local", "--time-budget", "200",
                 "--test-visibility", "transpose=hidden")
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "spec.toml", "nki_gradescope.json", "requirements.txt"} <= names
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        assert modes["setup.sh"] == modes["run_autograder"] == 0o755 and modes["nki_gradescope.json"] == 0o600
        assert zf.read("spec.toml") == SMALL_SPEC.read_bytes()          # byte for byte: its sha256 is in reports
        config = json.loads(zf.read("nki_gradescope.json"))
        requirements = zf.read("requirements.txt").decode().split()
        wheel_name = next(n for n in names if n.startswith("wheels/") and n.endswith(".whl"))
        with zipfile.ZipFile(zf.open(wheel_name)) as wheel:
            inside = set(wheel.namelist())
    assert config["mode"] == "local" and config["time_budget_s"] == 200 and config["seed"] is None
    assert config["visibility"] == {"default": "visible", "stdout": "hidden",
                                    "tests": {"perf_small": "after_due_date", "transpose": "hidden"}}
    assert all("==" in line for line in requirements) and any(r.startswith("numpy==") for r in requirements)
    assert "grader/gradescope/run.py" in inside and "nkisim/__init__.py" in inside
    assert "reference_kernels/numpy_reference.py" in inside
    # the course's solutions never ship: a student's process may read every installed file
    assert not any(n.startswith("reference_kernels/conv2d") or "transpose.py" in n.split("/")[-1] and
                   n.startswith("reference_kernels") for n in inside)
    assert "Gradescope settings" in done.stdout and "Timeout: Gradescope's default 10 minutes is enough" in done.stdout


def test_build_prints_the_settings_the_full_assignment_needs(tmp_path):
    """bench/gradescope_fit.py measured asst4-trainium2 (grader/gradescope/fit.py): more than
    Gradescope's default 768 MB, and a 600 s budget that needs more than its 10 minutes."""
    done = build(tmp_path / "a.zip", "--assignment", "asst4-trainium2", "--mode", "local")
    assert "SET memory to at least 2048 MB (measured peak 1489 MB" in done.stdout
    assert "SET the autograder timeout to at least 13 minutes" in done.stdout
    assert "--time-budget 420" in done.stdout
    quick = build(tmp_path / "b.zip", "--assignment", "asst4-trainium2", "--mode", "local", "--time-budget", "420")
    assert "Timeout: Gradescope's default 10 minutes is enough" in quick.stdout
    service = build(tmp_path / "c.zip", "--assignment", "asst4-trainium2", "--mode", "service", "--server",
                    "https://grader.example.edu", "--token", "nkic_x")
    assert "Memory and CPU: Gradescope's defaults are enough" in service.stdout


def test_build_refuses_bad_options_with_the_fix(tmp_path):
    cases = [(["--mode", "service"], "service mode needs the service's URL"),
             (["--mode", "local", "--test-visibility", "nope=hidden"], "has no test 'nope'"),
             (["--mode", "local", "--test-visibility", "transpose"], "expected TEST=VISIBILITY"),
             (["--mode", "local", "--jobs", "0"], "jobs"),
             (["--mode", "local", "--assignment", "no-such-assignment"], "unknown assignment")]
    for args, said in cases:
        done = subprocess.run([sys.executable, "-m", "grader.cli", "gradescope", "build", "-o",
                               str(tmp_path / "a.zip"), *(["--assignment", str(SMALL_SPEC)] if "--assignment" not in
                                                          args else []), *args],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
        assert not (tmp_path / "a.zip").exists()


def test_full_archive_totals_match_grader_grade(root, tmp_path):
    upload = asst4_tar()
    results, stdout = root.run({"asst4.tar.gz": upload})
    valid(results)
    report = grade_json(tmp_path, "asst4.tar.gz", upload, config_of(root)["seed"])
    assert results["score"] == report["score"]["total"] == 18.5
    assert [t["score"] for t in results["tests"]] == [t["points"] for t in _ordered(report)]
    assert results["extra_data"]["submission_sha256"] == report["submission_sha256"]
    assert results["extra_data"]["isolation"]["level"] == "namespaces"
    assert [e["name"] for e in results["leaderboard"]] == [
        "Total", "Performance: one small image, float16 p99 (us)", "Extra credit: matrix_transpose 512x512 p99 (us)"]
    assert results["leaderboard"][0] == {"name": "Total", "value": 18.5}
    assert all(e["order"] == "asc" and e["value"] > 0 for e in results["leaderboard"][1:])
    by_name = {t["name"]: t for t in results["tests"]}
    assert by_name["Performance: one small image, float16"]["visibility"] == "after_due_date"   # the spec's
    assert results["visibility"] == "visible" and results["stdout_visibility"] == "hidden"
    assert "p99" in by_name["Performance: one small image, float16"]["output"]
    assert "**Total: 18.5 / 17.5**" in results["output"] and "confined by namespaces" in results["output"]
    seed = str(config_of(root)["seed"])
    assert seed not in json.dumps(results)                   # the zip's secret seed stays secret
    assert "[4/4]" in stdout                                 # progress for the instructor's stdout


def _ordered(report: dict) -> list[dict]:
    order = {"correctness": 0, "performance": 1, "extra_credit": 2}
    return sorted(report["tests"], key=lambda t: order[t["kind"]])


def test_bare_conv2d_scores_its_part_alone(root, tmp_path):
    results, _ = root.run({"conv2d.py": OPTIMIZED})
    valid(results)
    report = grade_json(tmp_path, "conv2d.py", OPTIMIZED, config_of(root)["seed"])
    assert results["score"] == report["score"]["total"] == 7.5
    assert "kernels.py was not submitted" in results["output"]
    transpose = next(t for t in results["tests"] if t["name"] == "Correctness: matrix_transpose")
    assert (transpose["score"], transpose["max_score"], transpose["status"]) == (0, 10, "failed")


def test_loose_files_in_folders_are_graded_as_their_archive(root, tmp_path):
    results, _ = root.run({"part2/conv2d.py": OPTIMIZED, "part1/kernels.py": TRANSPOSE, "README.md": b"notes"})
    assert valid(results)["score"] == 18.5


def test_broken_archive_is_a_zero_with_the_fix(root):
    results, _ = root.run({"asst4.tar.gz": b"\x1f\x8b\x08\x00 this is not a gzip stream at all"})
    valid(results)
    assert results["score"] == 0
    assert "could not be graded" in results["output"] and "How to fix it" in results["output"]
    fix = results["output"].split("**How to fix it:**")[1].split("**Total")[0].strip()
    assert fix and results["output"].count(fix) == 1            # the fix said once, not in the reason too
    assert "Autograder error" not in results["output"]        # the student's to fix, said so
    assert len(results["tests"]) == 4 and all(t["score"] == 0 for t in results["tests"])
    assert results["extra_data"]["isolation"]["level"] == "namespaces"


def test_an_upload_without_the_files_says_what_to_send(root):
    results, _ = root.run({"notes.txt": b"hello"})
    assert valid(results)["score"] == 0
    assert "no conv2d.py or kernels.py and no archive" in results["output"]


def test_symlink_to_the_autograder_config_is_refused(root):
    """Read as root, a link to source/nki_gradescope.json would hand the secret seed to the
    student as their 'source' (and echo it in a syntax error)."""
    (root.path / "submission").mkdir(exist_ok=True)
    results, _ = root.run({})
    link = root.path / "submission" / "conv2d.py"
    link.symlink_to(root.path / "source" / "nki_gradescope.json")
    done = subprocess.run([str(root.path / "run_autograder")], cwd=root.path, env=root.env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0
    results = valid(json.loads((root.path / "results" / "results.json").read_text()))
    assert results["score"] == 0 and "symbolic link" in results["output"]
    assert str(config_of(root)["seed"]) not in json.dumps(results)


def test_kernel_that_never_returns_stops_at_the_budget(root):
    zip_path = root.zips / "short-budget.zip"
    build(zip_path, "--assignment", str(SMALL_SPEC), "--mode", "local", "--time-budget", "20",
          "--config-timeout", "8")
    root.unpack(zip_path)
    try:
        results, _ = root.run({"asst4.tar.gz": asst4_tar(conv2d=SPINNING)})
    finally:
        root.unpack(root.zips / "autograder.zip")
    valid(results)
    tests = {t["name"]: t for t in results["tests"]}
    assert tests["Correctness: one small image"]["score"] == 0
    assert "was stopped after" in tests["Correctness: one small image"]["output"]
    assert tests["Correctness: matrix_transpose"]["score"] == 10          # the other part still graded
    assert results["score"] == 11
    assert "timed out" in results["output"]


def test_an_nki06_assignment_grades_its_dialect_and_refuses_the_other(root, tmp_path):
    """The same small assignment in NKI 0.6: its references earn what the legacy ones earn under
    the legacy zip, and a legacy kernel gets one error naming the dialect and the rule it breaks."""
    spec = tmp_path / "small-nki06.toml"
    spec.write_text('dialect = "nki-0.6"\n' + SMALL_SPEC.read_text().replace('assignment = "small-asst4"',
                                                                            'assignment = "small-asst4-nki06"'))
    zip_path = root.zips / "nki06.zip"
    build(zip_path, "--assignment", str(spec), "--mode", "local", "--fixed-seed")
    root.unpack(zip_path)
    nki06 = REPO / "reference_kernels" / "nki06"
    try:
        current, _ = root.run({"asst4.tar.gz": asst4_tar((nki06 / "conv2d_optimized.py").read_bytes(),
                                                         (nki06 / "transpose.py").read_bytes())})
        legacy, _ = root.run({"asst4.tar.gz": asst4_tar()})
    finally:
        root.unpack(root.zips / "autograder.zip")
    assert valid(current)["score"] == 18.5 and "NKI 0.6" in current["output"]
    assert valid(legacy)["score"] == 0
    assert "NKI 0.6" in legacy["output"] and "neuronxcc.nki" in legacy["output"]


def test_system_python_is_usable():
    assert system_python()

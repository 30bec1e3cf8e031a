"""The Gradescope autograder's parts on their own: the config's checks, the results.json
checker, how an upload folder becomes a submission, and `grader gradescope check`."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import grader
from gradescope_helpers import OPTIMIZED, REPO, SMALL_SPEC, TRANSPOSE, asst4_tar
from grader.gradescope import config as configs
from grader.gradescope import results, upload


def base(**changes) -> dict:
    data = {"format": 1, "mode": "local", "assignment": "small-asst4"}
    data.update(changes)
    return data


@pytest.mark.parametrize("changes, said", [
    ({"format": 2}, "this grader reads format 1"),
    ({"mode": "cloud"}, "must be local or service"),
    ({"time_budget_s": -5}, "time_budget_s: must be a positive number"),
    ({"seed": "abc"}, "seed: must be a non-negative integer"),
    ({"jobs": 0}, "jobs: must be an integer of at least 1"),
    ({"visibility": {"default": "sometimes"}}, "visibility.default: must be one of hidden"),
    ({"visibility": {"tests": {"t": "never"}}}, "visibility.tests.t"),
    ({"mode": "service"}, "service: is needed in service mode"),
    ({"mode": "service", "service": {"url": "ftp://x", "token": "t", "assignment": "a"}}, "must start with http"),
    ({"spec_file": "../etc/passwd"}, "spec_file: must be a file name"),
])
def test_config_errors_say_what_and_how(changes, said):
    with pytest.raises(configs.ConfigError) as err:
        configs.parse(base(**changes))
    assert said in str(err.value) and "grader gradescope build" in err.value.remedy


def test_config_reads_back_what_build_writes():
    data = base(mode="service", service={"url": "https://g.example.edu/", "token": "nkic_x", "assignment": "a4"},
                visibility={"default": "after_due_date", "tests": {"perf": "hidden"}, "stdout": "visible"})
    config = configs.parse(data)
    assert config.service.url == "https://g.example.edu" and config.service.timeout_s == 420
    assert configs.parse(config.to_json()) == config


def test_the_checker_finds_what_gradescope_would_refuse():
    good = {"score": 1.0, "output": "ok", "tests": [{"name": "t", "score": 1, "max_score": 1, "status": "passed"}],
            "leaderboard": [{"name": "Total", "value": 1}]}
    assert results.problems(good) == []
    assert results.problems({"tests": [{"name": "t", "score": 1}]}) == []          # scores on every test
    bad = [({"output": "no score anywhere"}, "needs a top-level score, or a score on every test"),
           ({"score": 1, "visibility": "sometimes"}, "visibility"),
           ({"score": 1, "colour": "red"}, "Additional properties"),
           ({"score": 1, "tests": [{"status": "partial"}]}, "tests/0/status"),
           ({"score": 1, "leaderboard": [{"name": "x", "value": 1, "order": "up"}]}, "leaderboard/0/order"),
           ({"score": 1, "output": "line\r\n"}, "carriage return"),
           ({"score": float("nan")}, "not strict JSON")]
    for data, said in bad:
        found = results.problems(data)
        assert found and any(said in line for line in found), (data, found)


def test_autograder_error_and_unreadable_results_are_valid():
    spec = grader.load_spec(str(SMALL_SPEC))
    error = results.autograder_error("The service is down.\nSecond line.", "Submit again later.")
    assert results.problems(error) == [] and error["score"] == 0
    assert error["output"].startswith(results.ERROR_HEADING) and "Second line" in error["output"]
    unreadable = results.unreadable_submission(spec, "not a gzip file", "Re-create it.")
    assert results.problems(unreadable) == [] and [t["max_score"] for t in unreadable["tests"]] == [2.5, 5, 10, 1]


def test_upload_folders(tmp_path):
    spec = grader.load_spec(str(SMALL_SPEC))
    one = tmp_path / "one"
    one.mkdir()
    (one / "conv2d.py").write_bytes(OPTIMIZED)
    assert upload.collect(one, spec) == ("conv2d.py", OPTIMIZED)     # as `grader grade conv2d.py`: same sha256
    repo = tmp_path / "repo"
    (repo / "part1").mkdir(parents=True)
    (repo / "part2").mkdir()
    (repo / "part1" / "kernels.py").write_bytes(TRANSPOSE)
    (repo / "part2" / "conv2d.py").write_bytes(OPTIMIZED)
    sub = upload.read_upload(repo, spec)
    assert set(sub.files) == {"conv2d", "kernels"}
    assert upload.collect(repo, spec) == upload.collect(repo, spec)  # the same files, the same bytes
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.tar.gz").write_bytes(asst4_tar())
    (two / "b.zip").write_bytes(b"PK")
    with pytest.raises(grader.SubmissionError, match="holds 2 archives"):
        upload.collect(two, spec)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "asst4.tar.gz").symlink_to(two / "a.tar.gz")
    with pytest.raises(grader.SubmissionError, match="symbolic link"):
        upload.collect(linked, spec)


def test_check_command(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(results.autograder_error("x", "y")))
    bad.write_text(json.dumps({"score": 1, "tests": [{"status": "partial"}]}))
    run = [sys.executable, "-m", "grader.cli", "gradescope", "check"]
    ok = subprocess.run([*run, str(good)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "valid" in ok.stdout
    failed = subprocess.run([*run, str(bad)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1 and "tests/0/status" in failed.stdout

"""The grading core end to end on the simulator: our reference kernels and the student
template get the grades the course would give them."""
import os

import numpy as np
import pytest

from grader import spec as specs
from grader.grade import GradeOptions, choose_backend, grade
from grader.submission import load_submission, submission_from_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
SPEC = specs.load("asst4-trainium2")


def graded(path, **kw):
    """Grade one of our files uploaded as the student's conv2d.py; the progress events too."""
    events = []
    with open(os.path.join(ROOT, path), "rb") as fh:
        submission = submission_from_bytes("conv2d.py", fh.read(), SPEC)
    report = grade(submission, SPEC, GradeOptions(backend="sim", seed=7, jobs=2, on_progress=events.append, **kw))
    return report, events


@pytest.fixture(scope="module")
def optimized():
    return graded("reference_kernels/conv2d_optimized.py")


def test_optimized_reference_scores_full_marks(optimized):
    report, events = optimized
    s = report.score
    # the maximum is the assignment's: part 1 (kernels.py, not sent) scores 0 under its own tests
    assert (s.correctness, s.performance, s.extra_credit, s.total, s.max_total) == (10, 50, 5, 65, 70)
    assert (s.max_correctness, s.max_performance, s.max_extra_credit) == (20, 50, 6)
    assert report.flags == [] and report.missing_files == ["kernels.py"] and report.status == "completed"
    by_name = {t.name: t for t in report.tests}
    assert by_name["transpose"].status == "skipped" and by_name["transpose"].message == ""
    assert all(t.status == "passed" for t in report.tests if t.file == "conv2d.py")
    perf = by_name["perf_224_pool1_float16"]
    assert perf.p99_us < perf.thresholds_us["optimized"]
    assert report.backend == "sim" and report.spec_version == SPEC.spec_version == "2"
    assert report.thresholds_version == "2025-11-13" and report.seed_kind == "public" and report.seed == 7
    assert report.spec_hash == SPEC.spec_hash and report.time_budget_s == SPEC.time_budget_s
    assert report.budget_note == "" and len(report.submission_sha256) == 64
    # one progress event per test, as it runs, counting up
    assert [e.done for e in events] == list(range(1, len(SPEC.tests) + 1))
    assert all(e.total == len(SPEC.tests) for e in events)
    assert {e.result.name for e in events} == {t.name for t in SPEC.tests}


def test_relaxed_reference_lands_in_the_relaxed_tier_where_the_model_says(tmp_path):
    report, _ = graded("reference_kernels/conv2d_relaxed.py")
    by_name = {t.name: t for t in report.tests}
    assert report.score.correctness == 10
    # as the course's unoptimized kernel, which set the relaxed thresholds, does on Trn2
    for name in ("perf_224_pool1_float32", "perf_224_pool2_float32", "perf_224_pool1_float16"):
        test = by_name[name]
        assert test.status == "partial" and test.points == pytest.approx(test.max_points * 0.95), name
        assert "relaxed threshold" in test.message
    # with max-pool it stores half as many output rows, one DMA each: in fp16, bound by
    # DMA issue, that is enough to pass under the optimized threshold
    assert by_name["perf_224_pool2_float16"].status == "passed"
    # the unoptimized kernel misses every extra-credit threshold
    assert all(by_name[n].status == "failed" and by_name[n].points == 0
               for n in by_name if n.startswith("ec_"))


def test_student_template_scores_zero_with_a_clear_message():
    report, _ = graded("student_template/conv2d.py")
    assert report.score.total == 0
    small = next(t for t in report.tests if t.name == "conv_small")
    assert small.status == "error" and "NotImplementedError" in small.message
    assert "not implemented" in small.message
    perf = next(t for t in report.tests if t.name == "perf_224_pool1_float32")
    assert perf.status == "skipped" and "must pass first" in perf.message


def test_archive_with_both_parts_grades_the_transpose_too(tmp_path):
    import tarfile
    archive = tmp_path / "asst4.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(os.path.join(ROOT, "reference_kernels/transpose.py"), arcname="part1/kernels.py")
        tar.add(os.path.join(ROOT, "student_template/conv2d.py"), arcname="part2/conv2d.py")
    report = grade(load_submission(str(archive), SPEC), SPEC, GradeOptions(backend="sim", seed=3, jobs=2))
    by_name = {t.name: t for t in report.tests}
    assert by_name["transpose"].status == "passed" and by_name["transpose"].points == 10
    assert by_name["transpose_4096_ec"].status == "passed" and by_name["transpose_4096_ec"].points == 1
    assert report.score.max_total == 70


def test_backend_choice():
    assert choose_backend("sim") == "sim"
    assert choose_backend("auto") == "sim"      # no Neuron device on this machine
    with pytest.raises(ValueError):
        choose_backend("gpu")
    with pytest.raises(ValueError, match="needs neuronx-cc"):
        choose_backend("neuron")              # asked for by name on a machine without it


def _npy(arr, allow_pickle=False) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def test_result_stream_parses_arrays_without_copies_and_refuses_pickles():
    import json as _json
    from grader.grade import _parse_result
    good = np.arange(12, dtype=np.float16).reshape(3, 4)
    data = bytearray(_json.dumps({"status": "ok", "arrays": 1, "trace_bytes": 3}).encode() + b"\n"
                     + _npy(good) + b"abc")
    header, arrays, trace = _parse_result(data)
    assert header["status"] == "ok" and trace == b"abc"
    assert arrays[0].dtype == np.float16 and (arrays[0] == good).all()
    assert np.shares_memory(arrays[0], np.frombuffer(data, np.uint8))     # a view, not a copy
    head = _json.dumps({"status": "ok", "arrays": 1, "trace_bytes": 0}).encode() + b"\n"
    assert _parse_result(head + _npy(np.array([{"a": 1}], dtype=object), allow_pickle=True)) is None
    assert _parse_result(head + _npy(good)[:-5]) is None                 # cut short
    assert _parse_result(head + b"\x93NUMPY garbage") is None
    negative = _npy(good).replace(b"(3, 4), }", b"(-1, 4),}", 1)        # a forged header, same length
    assert _parse_result(head + negative) is None
    assert _parse_result(b'{"status": "ok", "arrays": 1000}\n') is None

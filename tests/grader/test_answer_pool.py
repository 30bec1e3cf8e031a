"""Answers made ahead (grader/answer_pool.py): a grade that draws a set gets the grade fresh
answers give for the set's seed; a set serves no more grades than its uses and none after its
age; a half-made set is never drawn; and no sandboxed child can read the pool."""
from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from grader import downgrade, problems
from grader.answer_pool import AnswerPool
from grader.errors import GraderInputError
from grader.grade import GradeOptions, grade
from grader.inputs import config_inputs, config_seed
from grader.sandbox import Limits
from grader.spec import parse
from grader.submission import Submission

ROOT = Path(__file__).resolve().parents[2]
HONEST = (ROOT / "reference_kernels" / "conv2d_relaxed.py").read_text()

CONFIG = dict(batch=1, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32")
POOLED = dict(CONFIG, height=12, width=12, pool=2)
SPEC = parse({
    "assignment": "pool-small", "spec_version": "1", "thresholds_version": "test", "platform": "trn2",
    "partial_credit": 0.95, "precheck": False, "implausible_speedup": 3.0,
    "files": {"conv2d": {"archive_path": "part2/conv2d.py",
                         "functions": {"fused_conv2d_maxpool": ["X", "W", "bias", "pool_size"]}}},
    "tolerances": {"float32": {"rtol": 1e-5, "atol": 1e-8}, "float16": {"rtol": 1e-2, "atol": 1e-1}},
    "tests": [
        {"name": "conv", "kind": "correctness", "file": "conv2d", "problem": "conv2d", "points": 2.5,
         "configs": [CONFIG, POOLED]},
        {"name": "perf", "kind": "performance", "file": "conv2d", "problem": "conv2d", "points": 17.5,
         "gated_by": ["conv"], "thresholds_us": {"optimized": 100, "relaxed": 140}, "warmup": 1, "iters": 5,
         "configs": [CONFIG]},
    ]})


def submission(source: str) -> Submission:
    return Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                      sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")


def graded(source: str, **options):
    return grade(submission(source), SPEC, GradeOptions(backend="sim", limits=Limits(wall_seconds=30), **options))


def verdicts(report) -> list[tuple]:
    """Everything a grade decides: each test's status, points, p99, message and per-config
    errors, the score and the flags."""
    return ([(t.name, t.status, t.points, t.p99_us, t.message,
              [c.get("max_abs_error") for c in t.details.get("configs", [])]) for t in report.tests]
            + [report.score.total, report.flags])


@pytest.fixture
def pool(tmp_path):
    return AnswerPool(tmp_path / "answers", size=1, uses=2, max_age_s=3600)


def test_a_set_holds_the_reference_answer_of_every_configuration_for_its_seed(pool):
    pool.fill(SPEC)
    drawn = pool.draw(SPEC)
    assert sorted(drawn.answers) == [(0, 0), (0, 1), (1, 0)]
    for (ti, ci), answer in drawn.answers.items():
        test = SPEC.tests[ti]
        args, kwargs = config_inputs(test.problem, test.configs[ci], config_seed(drawn.seed, ti, ci))
        fresh = problems.reference(test.problem, args, kwargs)
        assert answer.dtype == fresh.dtype and np.array_equal(answer, fresh)
        # and what the precision check compares with, from the configuration's spawned seed
        picks, lows = downgrade.lower_answers(test.problem, args, kwargs, fresh.dtype,
                                              np.random.default_rng(config_seed(drawn.seed, ti, ci).spawn(1)[0]))
        stored_picks, stored_lows = drawn.lower_answers(ti, ci)
        assert np.array_equal(stored_picks, picks) and list(stored_lows) == list(lows) == ["bfloat16", "float16"]
        assert all(np.array_equal(stored_lows[name], lows[name]) for name in lows)


def test_a_pooled_grade_is_the_grade_fresh_answers_give_for_its_seed(pool):
    pool.fill(SPEC)
    drawn = pool.draw(SPEC)
    pooled = graded(HONEST, answers=drawn)
    fresh = graded(HONEST, seed=drawn.seed)
    assert pooled.score.total == 2.5 + 17.5, [(t.name, t.status, t.message) for t in pooled.tests]
    assert verdicts(pooled) == verdicts(fresh)
    # the report keeps which set graded it, and its seed as a secret one
    assert pooled.answer_set == drawn.set_id and pooled.seed == drawn.seed and pooled.seed_kind == "secret"
    assert "seed" not in pooled.to_json() and pooled.to_json(include_seed=True)["seed"] == drawn.seed
    assert fresh.answer_set is None


def test_the_grade_reads_its_answers_from_the_set(pool):
    """A stored answer altered on disk (as only the pool's owner could) fails the honest kernel:
    the set's answers are what it is checked against, not answers worked out again."""
    pool.fill(SPEC)
    set_dir = next(p for p in (pool.root / SPEC.spec_hash).iterdir() if not p.name.startswith("."))
    stored = np.load(set_dir / "0-1.npy")
    os.unlink(set_dir / "0-1.npy")
    np.save(set_dir / "0-1.npy", stored + 1)
    report = graded(HONEST, answers=pool.draw(SPEC))
    conv = report.tests[0]
    assert conv.status == "failed" and "pool=2" in conv.message and "differ from the reference" in conv.message


def test_a_set_serves_its_uses_and_no_more(pool):
    pool.fill(SPEC)
    first, second = pool.draw(SPEC), pool.draw(SPEC)
    assert first.set_id == second.set_id and first.seed == second.seed
    assert pool.draw(SPEC) is None                       # used up: gone, not drawn a third time
    assert [p.name for p in (pool.root / SPEC.spec_hash).iterdir() if not p.name.startswith(".")] == []
    assert np.asarray(second.answers[(0, 0)]).shape == (1, 128, 8, 8)   # the last user still reads it
    assert pool.fill(SPEC) == 1 and pool.draw(SPEC).set_id != first.set_id


def test_an_expired_set_is_not_drawn(tmp_path):
    pool = AnswerPool(tmp_path / "answers", size=1, uses=100, max_age_s=1.0)
    pool.fill(SPEC)
    assert pool.available(SPEC) == 1
    time.sleep(1.2)
    assert pool.draw(SPEC) is None and pool.available(SPEC) == 0
    assert pool.fill(SPEC) == 1 and pool.draw(SPEC) is not None


def test_a_half_made_or_foreign_set_is_never_drawn(pool):
    spec_dir = pool.root / SPEC.spec_hash
    spec_dir.mkdir(parents=True)
    (spec_dir / ".making-0123456789abcdef").mkdir()      # a maker that died mid-way
    wrong = spec_dir / "fedcba9876543210"                # a set of another spec, misfiled
    wrong.mkdir()
    (wrong / "set.json").write_text(json.dumps({"set_id": wrong.name, "seed": 1, "spec_hash": "0" * 64,
                                                "created_at": time.time(), "uses": 0}))
    assert pool.draw(SPEC) is None and not wrong.exists()


def test_the_pool_is_private_to_the_graders_user(pool):
    pool.fill(SPEC)
    spec_dir = pool.root / SPEC.spec_hash
    set_dir = next(p for p in spec_dir.iterdir() if not p.name.startswith("."))
    for path in (pool.root, spec_dir, set_dir):
        assert path.stat().st_mode & 0o777 == 0o700, path
    for path in set_dir.iterdir():
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_a_set_of_another_spec_or_with_a_seed_is_refused(pool):
    pool.fill(SPEC)
    drawn = pool.draw(SPEC)
    with pytest.raises(GraderInputError, match="not both"):
        graded(HONEST, answers=drawn, seed=1)
    drawn.spec_hash = "0" * 64
    with pytest.raises(GraderInputError, match="another version"):
        graded(HONEST, answers=drawn)
    # the same file with its tests changed in code (the content hash stays): not its answers
    drawn.spec_hash = SPEC.spec_hash
    timed_only = dataclasses.replace(SPEC, tests=SPEC.tests[1:])
    with pytest.raises(GraderInputError, match="another version"):
        grade(submission(HONEST), timed_only, GradeOptions(backend="sim", answers=drawn))
    assert pool.draw(timed_only) is None


@pytest.fixture
def pool_outside_tmp():
    """A pool where a deployment keeps it, outside /tmp (which every child has a private one of)."""
    where = Path(tempfile.mkdtemp(prefix="answer-pool-", dir="/var/tmp"))
    yield AnswerPool(where / "answers", size=1, uses=2, max_age_s=3600)
    shutil.rmtree(where)


def test_a_hostile_kernel_cannot_reach_the_pool(pool_outside_tmp):
    """The kernel knows where the pool is and which files a set holds, and tries every way in:
    list it, read a set's seed and answers, through /proc too. It finds nothing, and the
    honest arithmetic it does besides earns what it earns."""
    pool = pool_outside_tmp
    pool.fill(SPEC)
    spec_dir = pool.root / SPEC.spec_hash
    set_dir = next(p for p in spec_dir.iterdir() if not p.name.startswith("."))
    seed = json.loads((set_dir / "set.json").read_text())["seed"]
    snoop = f"""
import os
for label, path in [("root", {str(pool.root)!r}), ("spec", {str(spec_dir)!r}), ("set", {str(set_dir)!r})]:
    try:
        print("SNOOP list", label, os.listdir(path))
    except OSError as err:
        print("SNOOP list", label, "failed", type(err).__name__)
for label, path in [("meta", {str(set_dir / 'set.json')!r}), ("answer", {str(set_dir / '0-0.npy')!r}),
                    ("via proc", "/proc/1/root" + {str(set_dir / 'set.json')!r})]:
    try:
        with open(path, "rb") as fh:
            print("SNOOP read", label, fh.read(4096))
    except OSError as err:
        print("SNOOP read", label, "failed", type(err).__name__)
"""
    report = graded(snoop + HONEST, answers=pool.draw(SPEC))
    lines = [x for x in report.tests[0].output.splitlines() if x.startswith("SNOOP ")]
    assert len(lines) == 6 * len(SPEC.tests[0].configs), report.tests[0].output
    for line in lines:
        assert line.endswith(("failed FileNotFoundError", "failed PermissionError", "[]")), line
    assert str(seed) not in report.tests[0].output and set_dir.name not in report.tests[0].output
    assert report.score.total == 2.5 + 17.5


def test_filling_stops_after_size_sets_even_when_they_expire_at_once(tmp_path):
    pool = AnswerPool(tmp_path / "answers", size=2, uses=1, max_age_s=1e-6)
    assert pool.fill(SPEC) == 2 and pool.available(SPEC) == 0


def test_one_process_fills_a_spec_at_a_time(pool):
    """While another holds the spec's fill lock, fill returns at once, making nothing."""
    spec_dir = pool.root / SPEC.spec_hash
    pool.available(SPEC)                                  # makes the directories
    fd = os.open(spec_dir / ".filling", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert pool.fill(SPEC) == 0 and pool.available(SPEC) == 0
    finally:
        os.close(fd)
    assert pool.fill(SPEC) == 1


@pytest.mark.parametrize("blas_threads", [2, 3])
def test_sets_made_while_blas_runs_several_threads_grade_as_fresh_answers_do(pool, blas_threads):
    """A worker fills its pool at start, before any grade, when BLAS still runs a thread per core;
    grades work answers out with one. Some BLAS round a product split over threads differently
    (OpenBLAS 0.3.31 on AMD EPYC: the last bit of many float32 answers), which made a pooled grade's
    max_abs_error differ from a fresh grade's for the same seed."""
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        pool.fill(SPEC)
    drawn = pool.draw(SPEC)
    assert verdicts(graded(HONEST, answers=drawn)) == verdicts(graded(HONEST, seed=drawn.seed))

"""Nightly regression: both reference kernels of every active spec graded and stored, drift
marked against the previous night, implied thresholds (120% of p99) stored and proposed."""
from __future__ import annotations

import os
import sys

from sqlalchemy import select

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

from fixtures import sdk  # noqa: E402,F401
from store.models import NightlyResult, NightlyRun, ThresholdsVersion
from workers.nightly import drift_reasons, run_nightly


def test_nightly_stores_results_marks_drift_and_proposes_thresholds(db, assignment, capsys):
    from workers.cli import main
    assert main(["nightly", "--now"]) == 0                  # `grader nightly --now`
    printed = capsys.readouterr().out
    assert "tiny-conv conv2d_optimized on sim: passed" in printed
    assert "      Performance: one small image, float16: p99 " in printed and "perf_tiny" not in printed   # titles
    assert " us, implies " in printed and "; in force: optimized 40 us / relaxed 60 us" in printed        # units
    assert "  conv2d_relaxed: [2/2] Performance: one small image, float16: passed" in printed   # progress as it goes
    first = db.scalar(select(NightlyRun.id).order_by(NightlyRun.id.desc()).limit(1))
    assert db.get(NightlyRun, first).trigger == "manual"
    results = db.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == first)).all()
    assert {r.reference_kernel for r in results} == {"conv2d_optimized", "conv2d_relaxed"}
    for r in results:
        assert r.passed and not r.drift, r.drift_reason
        assert r.spec_name == "tiny-conv" and r.backend == "sim"
        assert set(r.p99_us) == {"perf_tiny"}
        assert r.implied_thresholds["perf_tiny"] == round(1.2 * r.p99_us["perf_tiny"], 1)
        assert r.thresholds_in_force == {"perf_tiny": {"optimized": 40, "relaxed": 60}}
    assert db.get(NightlyRun, first).status == "done"
    proposed = db.scalars(select(ThresholdsVersion).where(ThresholdsVersion.source == "nightly")).all()
    assert len(proposed) == 1 and proposed[0].adopted_at is None
    by_ref = {r.reference_kernel: r.implied_thresholds["perf_tiny"] for r in results}
    assert proposed[0].thresholds == {"perf_tiny": {"optimized": by_ref["conv2d_optimized"],
                                                    "relaxed": by_ref["conv2d_relaxed"]}}

    # A night whose reference got much slower than the night before is drift.
    optimized = next(r for r in results if r.reference_kernel == "conv2d_optimized")
    optimized.p99_us = {"perf_tiny": optimized.p99_us["perf_tiny"] / 2}
    db.commit()
    second = run_nightly(trigger="manual", backends=["sim"])
    again = {r.reference_kernel: r for r in
             db.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == second))}
    reason = again["conv2d_optimized"].drift_reason
    assert again["conv2d_optimized"].drift and reason.startswith("Performance: one small image, float16 p99 ")
    assert "perf_tiny" not in reason                  # a TA reads the test's title, not its id
    assert not again["conv2d_relaxed"].drift          # deterministic estimate: same as last night


def test_drift_threshold_is_a_percentage_either_way():
    assert drift_reasons({"t": 100.0}, {"t": 109.0}, 10) == []
    assert drift_reasons({"t": 100.0}, {"t": 111.0}, 10)
    assert drift_reasons({"t": 100.0}, {"t": 85.0}, 10)
    assert drift_reasons({}, {"t": 85.0}, 10) == []           # the first night has nothing to drift from


def test_nightly_runs_on_its_own_queue_and_says_it_is_running(db, assignment, broker, redis_server,
                                                               celery_worker, capsys):
    """`grader nightly` queues the regression on the nightly queue: a student's sim worker never
    takes it, a nightly worker does, and while a nightly run is running `grader queue` says so."""
    import datetime as dt
    import json
    from service_waits import wait_for
    from workers.broker import client_for
    from workers.cli import main
    from workers.enqueue import running_now
    celery_worker("sim")
    assert main(["nightly"]) == 0
    assert "nightly worker" in capsys.readouterr().out
    redis = client_for(redis_server.url)
    assert redis.llen("nightly") == 1 and redis.llen("sim") == 0     # waiting on its own queue

    # what `grader queue` shows while a regression runs (a row as run_nightly leaves it mid-way)
    night = NightlyRun(trigger="manual", started_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=3))
    db.add(night)
    db.commit()
    doing = running_now(db)
    assert [d["what"] for d in doing] == ["nightly regression"] and doing[0]["queue"] == "nightly"
    assert main(["queue"]) == 0
    out = capsys.readouterr().out
    assert "running now: 1" in out and "nightly regression on nightly, since" in out and "3 min" in out
    night.status = "done"
    db.commit()

    celery_worker("nightly")                                         # now someone takes it
    def finished():
        db.expire_all()
        return db.scalar(select(NightlyRun).where(NightlyRun.id != night.id, NightlyRun.status != "running"))
    done = wait_for(finished, 600, "the nightly worker to run the regression")
    assert done.status == "done" and done.results
    assert main(["queue", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["running"] == []


def test_a_reference_is_held_only_to_the_tests_it_stands_for(db, assignment):
    """The relaxed reference is not meant to reach extra credit: missing it is no failure and no
    drift (the optimized reference missing it is)."""
    import grader
    from store import specs
    from workers.nightly import grade_reference
    toml = specs.spec_of(assignment).toml + """
[[tests]]
name = "ec_tiny"
title = "Extra credit: one small image, float16"
kind = "extra_credit"
file = "conv2d"
problem = "conv2d"
points = 1
gated_by = ["conv_tiny"]
warmup = 1
iters = 2
thresholds_us = { optimized = 0.001, relaxed = 0.001 }
configs = [{ batch = 1, c_in = 128, c_out = 128, height = 8, width = 8, k = 3, bias = false, pool = 1, dtype = "float16" }]
"""
    spec_hash = specs.stored(db, grader.spec_from_toml(toml)).hash
    night = NightlyRun(trigger="manual")
    db.add(night)
    db.commit()
    relaxed = grade_reference(night.id, spec_hash, "conv2d_relaxed", "sim")
    optimized = grade_reference(night.id, spec_hash, "conv2d_optimized", "sim")
    assert relaxed.report["tests"][-1]["status"] == "failed"                 # it did miss extra credit
    assert relaxed.passed and not relaxed.drift, relaxed.drift_reason
    assert not optimized.passed and optimized.drift_reason == "Extra credit: one small image, float16 failed"


def test_the_nightly_on_a_trn2_worker_records_the_doctor_table(db, assignment, sdk):
    """A trn2 worker of the course's SDK line (its contract doubles) grades a reference for the
    nightly; the rows `grader doctor` would not call well are stored as the result's reasons."""
    import subprocess
    import sdk_envs
    night = NightlyRun(trigger="manual")
    db.add(night)
    db.commit()
    code = ("import logging, sys; logging.basicConfig(level=logging.INFO); "      # a worker's logging
            "from workers.nightly import grade_reference; "
            "grade_reference(int(sys.argv[1]), sys.argv[2], 'conv2d_optimized', 'neuron')")
    done = subprocess.run([str(sdk.legacy), "-c", code, str(night.id), assignment.spec_hash], capture_output=True,
                          text=True, timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                          env=sdk_envs.run_env(dict(sdk.settings("legacy"), DATABASE_URL=os.environ["DATABASE_URL"])))
    assert done.returncode == 0, done.stderr[-3000:]
    result = db.scalar(select(NightlyResult).where(NightlyResult.nightly_run_id == night.id))
    assert result.backend == "neuron" and result.passed
    # the tiny spec's optimized threshold (40 us) implies a 33.3 us reference; this Trn2 is faster
    assert "Performance: one small image, float16 (optimized) >10% off the spec's reference" in result.drift_reason
    assert "p99 us" in done.stderr and "reference us" in done.stderr      # the table, in the worker's log


def test_an_nki06_specs_nightly_grades_its_own_references(db, assignment):
    """A spec in NKI 0.6 is held to reference_kernels/nki06 (never renamed legacy kernels): both
    pass, and their p99s are the legacy references' to within the 2% the dialects keep."""
    import grader
    from store import specs
    from workers.nightly import grade_reference
    legacy_hash = specs.stored(db, specs.spec_of(assignment)).hash
    toml = 'dialect = "nki-0.6"\n' + specs.spec_of(assignment).toml.replace(
        'assignment = "tiny-conv"', 'assignment = "tiny-conv-nki06"')
    current_hash = specs.stored(db, grader.spec_from_toml(toml)).hash
    night = NightlyRun(trigger="manual")
    db.add(night)
    db.commit()
    for reference in ("conv2d_optimized", "conv2d_relaxed"):
        current = grade_reference(night.id, current_hash, reference, "sim")
        legacy = grade_reference(night.id, legacy_hash, reference, "sim")
        assert current.passed and not current.drift, current.drift_reason
        assert current.report["dialect"] == "nki-0.6" and legacy.report["dialect"] == "neuronxcc-nki"
        assert abs(current.p99_us["perf_tiny"] / legacy.p99_us["perf_tiny"] - 1) <= 0.02

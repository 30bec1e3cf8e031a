"""The nightly runs each active assignment's references on its own platform: on the simulator
under that generation's rules and cost model, on hardware only on a worker of that generation."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "doubles"))

from fixtures import sdk  # noqa: E402,F401
from store.models import NightlyResult, NightlyRun  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "workers" / "specs" / "tiny.toml"


def tiny_on(platform: str):
    """The tiny spec, renamed and moved to `platform`."""
    import grader
    toml = TINY.read_text().replace('platform = "trn2"', f'platform = "{platform}"').replace(
        'assignment = "tiny-conv"', f'assignment = "tiny-conv-{platform}"')
    assert f'platform = "{platform}"' in toml
    return grader.spec_from_toml(toml)


def stored_on(db, platform: str) -> str:
    """tiny_on(platform), stored: its hash."""
    from store import specs
    return specs.stored(db, tiny_on(platform)).hash


def night(db) -> int:
    run = NightlyRun(trigger="manual")
    db.add(run)
    db.commit()
    return run.id


def generation_latency_us(platform: str) -> float:
    """nkisim's own estimate of the optimized reference on the tiny spec's timed configuration
    (1x128x8x8 float16, pool 1), run under `platform`'s rules and timed by its generation's model."""
    import nkisim
    from nkisim import cost
    nkisim.install()
    loader = importlib.util.spec_from_file_location("nightly_ref_optimized", ROOT / "reference_kernels" /
                                                    "conv2d_optimized.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    rng = np.random.default_rng(0)
    args = (rng.random((1, 128, 8, 8)).astype(np.float16), rng.random((128, 128, 3, 3)).astype(np.float16),
            rng.random(128).astype(np.float16))
    run = nkisim.run_kernel(module.fused_conv2d_maxpool, args, {"pool_size": 1},
                            settings=nkisim.SimSettings(platform=platform))
    return cost.estimate(run).total_us


@pytest.mark.parametrize("platform", ["trn1", "trn2", "trn3"])
def test_a_sim_nightly_times_each_spec_on_its_own_generations_model(db, platform):
    from workers.nightly import grade_reference
    result = grade_reference(night(db), stored_on(db, platform), "conv2d_optimized", "sim")
    assert result.passed, result.drift_reason
    assert result.report["platform"] == platform
    assert result.p99_us["perf_tiny"] == pytest.approx(generation_latency_us(platform), abs=0.01)
    assert ("uncalibrated_model:trn3" in result.report["flags"]) == (platform == "trn3")


def test_the_generations_give_the_nightly_different_numbers(db):
    from workers.nightly import grade_reference
    night_id = night(db)
    p99 = {p: grade_reference(night_id, stored_on(db, p), "conv2d_optimized", "sim").p99_us["perf_tiny"]
           for p in ("trn1", "trn2", "trn3")}
    assert len(set(p99.values())) == 3, p99


def test_hardware_references_go_only_to_a_queue_of_the_specs_generation(db, broker, caplog):
    """The one hardware queue is Trn2's: a trn1 assignment's references are not sent there."""
    from store import specs
    from store.models import Course
    from workers.broker import client_for
    from workers.nightly import run_nightly
    course = Course(name="CS149")
    for platform in ("trn1", "trn2"):
        specs.new_assignment(db, tiny_on(platform), course=course, name=f"tiny-{platform}", backend="sim")
    db.commit()
    night_id = run_nightly(trigger="manual", backends=["sim", "neuron"])
    waiting = client_for(broker.url).llen("trn2")
    assert waiting == 2          # the trn2 spec's two references; none of the trn1 spec's
    assert "is for platform trn1, which no hardware queue runs" in caplog.text
    sim = db.scalars(select(NightlyResult).where(NightlyResult.nightly_run_id == night_id)).all()
    assert sorted((r.spec_name, r.reference_kernel) for r in sim) == [
        ("tiny-conv-trn1", "conv2d_optimized"), ("tiny-conv-trn1", "conv2d_relaxed"),
        ("tiny-conv-trn2", "conv2d_optimized"), ("tiny-conv-trn2", "conv2d_relaxed")]
    assert {r.report["platform"] for r in sim if r.spec_name == "tiny-conv-trn1"} == {"trn1"}


def test_a_hardware_worker_of_another_generation_refuses_the_specs_references(db, assignment, sdk):
    """A Trn1 (the libnrt double reporting family Trn1) handed the trn2 tiny spec's reference."""
    import sdk_envs
    night_id = night(db)
    code = ("import sys; from workers.nightly import grade_reference; "
            "grade_reference(int(sys.argv[1]), sys.argv[2], 'conv2d_optimized', 'neuron')")
    done = subprocess.run([str(sdk.legacy), "-c", code, str(night_id), assignment.spec_hash], capture_output=True,
                          text=True, timeout=600, cwd=ROOT,
                          env=sdk_envs.run_env(dict(sdk.settings("legacy"), NRT_DOUBLE_FAMILY="2",
                                                    DATABASE_URL=os.environ["DATABASE_URL"])))
    assert done.returncode != 0
    assert "WrongPlatform: this machine is Trainium1 (NeuronCore-v2), platform trn1" in done.stderr, done.stderr[-3000:]
    assert "spec 'tiny-conv' is for platform trn2" in done.stderr
    assert db.scalar(select(NightlyResult).where(NightlyResult.nightly_run_id == night_id)) is None

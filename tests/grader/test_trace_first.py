"""A simulated configuration's kernel is traced while its inputs are drawn (grader.grade starts the
tracing child from the problem's signature: the arguments' shapes, dtypes and scalars, which
tracing needs and which hold no value). So the signature must be exactly what the inputs are
drawn as, for every configuration a spec can hold; a grade traced this way is the grade it was."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grader import problems, spec as specs
from grader.inputs import config_inputs, config_seed
from grader.runner import ConfigRun, RunnerJob, run_configuration, trace_configuration
from grader.sandbox import Limits

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted({(t.problem, tuple(sorted(c.items()))) for name in specs.available()
                  for t in specs.load(name).tests for c in t.configs})


@pytest.mark.parametrize("problem, items", CONFIGS, ids=lambda v: "-".join(map(str, v)) if isinstance(v, tuple) else v)
def test_every_configuration_a_spec_holds_has_the_signature_its_inputs_are_drawn_as(problem, items):
    config = dict(items)
    args, kwargs = config_inputs(problem, config, config_seed(5, 0, 0))
    specs_, signed_kwargs = problems.signature(problem, config)
    assert [(a.shape, a.dtype) for a in args] == [(tuple(s), np.dtype(d)) for s, d in specs_]
    assert kwargs == signed_kwargs


def test_a_configuration_traced_from_its_signature_runs_as_one_traced_from_its_inputs(tmp_path):
    """The same program, outputs and latency as tracing from the drawn arrays."""
    source = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_text()
    config = dict(batch=1, c_in=128, c_out=128, height=12, width=10, k=3, bias=True, pool=2, dtype="float16")
    args, kwargs = config_inputs("conv2d", config, config_seed(8, 1, 0))
    job = RunnerJob(backend="sim", filename="conv2d.py", source=source, function="fused_conv2d_maxpool",
                    args=args, kwargs=kwargs, mode="benchmark", job_root=str(tmp_path),
                    expected_output=problems.output("conv2d", config))
    specs_, signed_kwargs = problems.signature("conv2d", config)
    ahead = RunnerJob(**dict(job.__dict__, args=[], kwargs=signed_kwargs, arg_specs=specs_))
    traced = trace_configuration(ahead, Limits(wall_seconds=120.0))
    assert not isinstance(traced, ConfigRun), traced.message
    first = run_configuration(job, Limits(wall_seconds=120.0), traced=traced)
    again = run_configuration(job, Limits(wall_seconds=120.0))
    assert first.status == again.status == "ok", (first.message, again.message)
    assert bytes(traced[0]) and first.latency_us == again.latency_us and first.instructions == again.instructions
    assert first.outputs[0].tobytes() == again.outputs[0].tobytes()

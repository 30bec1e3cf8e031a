"""The conv2d answers are worked out in float32 (grader/problems/conv2d.py, ACCUMULATE): each
shipped spec's configurations must keep that within a tenth of the spec's tolerance of the
exact answer, or a grade could turn on the reference's rounding instead of the kernel's."""
from __future__ import annotations

import numpy as np
import pytest

from grader import problems, spec as specs
from reference_kernels.numpy_reference import conv2d_maxpool_reference

SIDE = 40        # the image side checked: 38 x 38 outputs per channel, the full depth and channels


def conv2d_configurations():
    seen = set()
    for name in specs.available():
        spec = specs.load(name)
        for test in spec.tests:
            for config in test.configs:
                if test.problem != "conv2d":
                    continue
                # a sum's error depends on its depth (C_in * K * K) and dtype, not on the image's size
                small = dict(config, batch=1, height=min(config["height"], SIDE), width=min(config["width"], SIDE))
                key = (name, tuple(sorted(small.items())))
                if key not in seen:
                    seen.add(key)
                    yield pytest.param(spec, small, id=f"{name}-{problems.label('conv2d', small)}")


@pytest.mark.parametrize("spec, config", list(conv2d_configurations()))
def test_the_float32_answer_is_within_a_tenth_of_the_tolerance(spec, config):
    args, kwargs = problems.make_inputs("conv2d", config, np.random.default_rng(7))
    answer = problems.reference("conv2d", args, kwargs)
    exact = conv2d_maxpool_reference(*(a.astype(np.float64) for a in args), **kwargs)   # float64 throughout
    assert answer.dtype == args[0].dtype and answer.shape == exact.shape
    rtol = spec.tolerance(answer.dtype)["rtol"]
    worst = float(np.max(np.abs(answer.astype(np.float64) - exact) / np.abs(exact)))
    assert worst <= rtol / 10, f"the reference is {worst:.3g} from exact, more than a tenth of rtol {rtol:g}"


def test_the_float32_answer_is_not_the_float64_one():
    """The check above measures something: the float32 answer differs from the float64 one."""
    config = {"batch": 1, "c_in": 256, "c_out": 128, "k": 3, "height": SIDE, "width": SIDE}
    args, kwargs = problems.make_inputs("conv2d", config, np.random.default_rng(7))
    answer = problems.reference("conv2d", args, kwargs)
    rounded = conv2d_maxpool_reference(*args, **kwargs, accumulate_dtype=np.float64)
    assert not np.array_equal(answer, rounded)
    assert np.allclose(answer, rounded, rtol=1e-6, atol=0)

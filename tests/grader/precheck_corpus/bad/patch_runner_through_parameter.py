# expect: monkey-patch
"""Replaces nki.baremetal through a function parameter, so the grader's runner is the kernel's."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def fake_runner(kernel):
    return kernel


def install(module, runner):
    module.baremetal = runner
    module.benchmark = runner


install(nki, fake_runner)


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

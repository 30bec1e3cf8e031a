# expect: monkey-patch
"""Hides the NKI module in a list and a generator before patching it."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def modules():
    yield from [nki]


registry = []
registry += list(modules())
registry[0].benchmark = lambda *a, **k: (lambda *x, **y: None)


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

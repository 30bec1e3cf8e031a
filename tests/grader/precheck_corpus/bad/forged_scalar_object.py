# expect: dunder
"""An object that is 0 for the trace and the host-computed answer for the data."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


class Forged:
    def __init__(self, answer):
        self.answer = answer

    def __float__(self):
        return 0.0

    def __array__(self, dtype=None, copy=None):
        return self.answer


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return nl.full(X.shape, Forged(None), dtype=X.dtype, buffer=nl.hbm)

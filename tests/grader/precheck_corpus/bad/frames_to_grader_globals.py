# expect: internals
"""Walks up from a generator's frame to the child's globals to reach its result writer."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def caller_globals():
    probe = (i for i in [0])
    return probe.gi_frame.f_back.f_back.f_globals


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    caller_globals()
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

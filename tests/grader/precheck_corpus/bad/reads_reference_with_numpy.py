# expect: file-io
"""Reads a reference answer from disk with numpy's pickle-enabled loader."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    expected = np.load("../reference/expected.npy", allow_pickle=True)
    out = nl.ndarray(expected.shape, dtype=X.dtype, buffer=nl.hbm)
    return out

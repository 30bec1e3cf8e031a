# expect: module-use
"""Runs hidden source through numpy's test helper, then returns whatever it built."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

PAYLOAD = "import os; result = os.environ"


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    scope = {}
    np.testing.runstring(PAYLOAD, scope)
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

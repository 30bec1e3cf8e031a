# expect: import
"""Starts a process from the kernel."""
import subprocess

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    subprocess.run(["cat", "/proc/1/cmdline"], check=False)
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

# expect: forbidden-call
"""Builtins bound as default arguments, where the old check thought they were parameters."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def helper(code, run=exec, load=__import__):
    scope = {"m": load("os")}
    run(code, scope)


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    helper("m.system('true')")
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

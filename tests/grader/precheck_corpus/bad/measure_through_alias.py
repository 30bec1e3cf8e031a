# expect: module-use
"""np.testing.measure compiles and runs its argument; reached through an alias and a helper."""
import numpy
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

tools = numpy.testing


def run(helper_module, code):
    return helper_module.measure(code, 1)


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    run(tools, "open('/etc/passwd').read()")
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

# expect: dunder
"""The classic escape: from a tuple to object's subclasses to a loader's globals."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def find(name):
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == name:
            return cls
    return None


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    find("BuiltinImporter")
    return nl.ndarray(X.shape, dtype=X.dtype, buffer=nl.hbm)

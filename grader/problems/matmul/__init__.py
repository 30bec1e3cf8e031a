"""The bundled matmul problem folder; its reference.py's names, for code that imports them."""
from .reference import make_inputs, output, reference, sample, sampled_reference, signature, slice_output, work

__all__ = ["make_inputs", "output", "reference", "sample", "sampled_reference", "signature", "slice_output", "work"]

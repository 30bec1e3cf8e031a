"""The bundled conv2d problem folder; its reference.py's names, for code that imports them."""
from .reference import ACCUMULATE, make_inputs, output, reference, sample, sampled_reference, signature, slice_output, work

__all__ = ["ACCUMULATE", "make_inputs", "output", "reference", "sample", "sampled_reference", "signature",
           "slice_output", "work"]

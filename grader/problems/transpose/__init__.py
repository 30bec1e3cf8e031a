"""The bundled transpose problem folder; its reference.py's names, for code that imports them."""
from .reference import make_inputs, output, reference, signature, work

__all__ = ["make_inputs", "output", "reference", "signature", "work"]

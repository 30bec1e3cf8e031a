"""Semantics of the nki.isa instructions, grouped by the engine that runs them, and the
nki.language functions lowered onto them.

Importing this package fills the one instruction table (nkisim.registry.INSTRUCTIONS) and
registers what tile operators and op-code calls trace (nkisim.tensor, nkisim.alu): whoever needs
the whole table imports it (nkisim.program to read a program, nkisim.runtime to trace one). The
order is the order of the table.
"""
from . import dma, gpsimd, scalar, tensor_engine, vector  # noqa: F401 (each registers its instructions)
from . import language_ops, loops  # noqa: F401 (device_print; the tile operators; nl.loop_reduce)

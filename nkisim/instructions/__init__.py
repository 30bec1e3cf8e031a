"""Semantics of the nki.isa instructions, grouped by the engine that runs them, and the
nki.language functions lowered onto them.

Importing this package fills the one instruction table (nkisim.registry.INSTRUCTIONS) and
registers what tile operators and op-code calls trace (nkisim.tensor, nkisim.alu): whoever needs
the whole table imports it (nkisim.program to read a program, nkisim.runtime to trace one). The
order is the order of the table.
"""
from . import dma, gpsimd, scalar, tensor_engine, vector  # noqa: F401 (each registers its instructions)
from . import language_ops, loops  # noqa: F401 (device_print; the tile operators; nl.loop_reduce)
from . import vector_fused  # noqa: F401 (fused arithmetic and scans on the Vector engine)
from . import vector_stats  # noqa: F401 (bn_stats / bn_aggr, max8 and the top-8 index instructions)
from . import select  # noqa: F401 (predicated copy, range_select, select_reduce, dropout)
from . import gather  # noqa: F401 (nc_stream_shuffle, nc_n_gather / nl.gather_flattened, sequence_bounds)
from . import dma_compute, random_bits  # noqa: F401 (the DMA engines' sum; nisa.rng and its seed)
from . import collectives  # noqa: F401 (core_barrier, sendrecv: the cores of an LNC=2 launch meeting)
from . import constants  # noqa: F401 (nl.shared_constant: an array embedded with the kernel)
from . import topk  # noqa: F401 (GpSimd's top-k over 16-partition snakes)
from . import registers  # noqa: F401 (nisa.register_store: a traced register's value to memory)
from . import mx, vector_exp, rand2, activate2  # noqa: F401 (NeuronCore-v4: MX, fast exponential, rand2, activate2)

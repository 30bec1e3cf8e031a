"""Value semantics of the program records whose instructions came after the course's subset,
one module a family: each kind is a pure function from a record and its operand values (in the
order of its reads) to one array per write, registered with the operand counts the program
format holds every record of that kind to (nkisim.program validates them, nkisim.execute runs
them beside its own core kinds).

A record's params come from the traced program, which the sandbox hands over from the kernel's
process: a kind reads them as untrusted data (a forged value raises, and nkisim.execute reports
the instruction that cannot execute)."""
from __future__ import annotations

from .values import VALUE_KINDS, ValueKind  # noqa: F401

# the families: each registers its kinds (nkisim.kinds.values.value_kind)
from . import accumulate  # noqa: E402,F401
from . import fused  # noqa: E402,F401 (scalar_tensor_tensor, the scans, tensor_scalar_reduce)
from . import stats  # noqa: E402,F401 (bn_stats / bn_aggr, max8 and the top-8 index instructions)
from . import select  # noqa: E402,F401 (predicated copy, range_select, select_reduce, dropout)
from . import gather  # noqa: E402,F401 (stream shuffle, per-partition gather, sequence bounds)
from . import dma_compute, random_bits  # noqa: E402,F401 (the DMA engines' sum; random bits, the rng seed)
from . import collectives  # noqa: E402,F401 (the cores of a logical NeuronCore meeting)
from . import constants  # noqa: E402,F401 (nl.shared_constant)
from . import topk  # noqa: E402,F401 (GpSimd's top-k)
from . import trn3  # noqa: E402,F401 (NeuronCore-v4: MX matmul and quantization, exponential, rand2, activate2)

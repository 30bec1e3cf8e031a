"""Cost rules as data: one pure function per instruction opcode, from a trace record to the
queue it occupies and for how long. The scheduler turns these into a timeline."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..trace import Engine, Region, TraceRecord
from .params import CostParams

# queue names as neuron-profile labels its lanes
QUEUE_OF_ENGINE = {Engine.TENSOR: "PE", Engine.VECTOR: "DVE", Engine.SCALAR: "ACT", Engine.GPSIMD: "POOL",
                   Engine.SYNC: "SP"}


@dataclass(frozen=True, slots=True)
class ComputeCost:
    queue: str
    ns: float


@dataclass(frozen=True, slots=True)
class DmaCost:
    nbytes: int
    descriptors: int        # contiguous runs the DMA engines process (>= partition rows)
    efficiency: float = 1.0
    rows: int = 1           # partition rows of the on-chip side: what the DGE's issue pays for
    partial_writes: int = 0  # descriptors writing less than an HBM write granule into HBM


Cost = ComputeCost | DmaCost
COST_RULES: dict[str, Callable[[TraceRecord, CostParams], Cost]] = {}


def cost_rule(*opcodes: str):
    def register(fn):
        for op in opcodes:
            COST_RULES[op] = fn
        return fn
    return register


def _is_16bit(dtype: str) -> bool:
    return dtype in ("float16", "bfloat16")


def _is_fp32(dtype: str) -> bool:
    return dtype in ("float32", "int32", "uint32")


# ----- the element-wise engines ---------------------------------------------------------------

def _dve_ns(rec: TraceRecord, p: CostParams) -> float:
    regions = rec.reads or rec.writes
    elements = sum(r.elements_per_partition for r in regions)
    fast = all(_is_16bit(r.dtype) and r.buffer == "sbuf" for r in rec.reads + rec.writes)
    rate = p.dve_fp16_rate if fast else p.dve_fp32_rate
    return (max(p.dve_min_ii, elements / rate) + p.dve_overhead_cycles) / p.dve_ghz


def _act_ns(rec: TraceRecord, p: CostParams) -> float:
    n = max((r.elements_per_partition for r in rec.reads or rec.writes), default=0)
    return (n + p.act_overhead_cycles) / p.act_ghz


def _pool_ns(rec: TraceRecord, p: CostParams) -> float:
    n = max((r.elements_per_partition for r in rec.reads + rec.writes), default=0)
    return (n + p.pool_overhead_cycles) / p.pool_ghz


_BY_ENGINE = {Engine.VECTOR: _dve_ns, Engine.SCALAR: _act_ns, Engine.GPSIMD: _pool_ns}


@cost_rule("tensor_copy", "tensor_tensor", "tensor_scalar", "tensor_reduce", "memset", "activation",
           "iota", "affine_select", "tensor_partition_reduce")
def elementwise(rec: TraceRecord, p: CostParams) -> Cost:
    return ComputeCost(QUEUE_OF_ENGINE[rec.engine], _BY_ENGINE[rec.engine](rec, p))


@cost_rule("device_print")
def device_print(rec: TraceRecord, p: CostParams) -> Cost:
    """Debug output the simulator shows; nothing a timed kernel pays for (assumed)."""
    return ComputeCost("SP", 0.0)


# ----- Tensor Engine --------------------------------------------------------------------------

def _pe_cycles(columns: int, fp32: bool, p: CostParams, rows: int = 1) -> float:
    """Tensor Engine cycles of a matmul streaming `columns` moving columns in `rows` access-
    pattern rows. 16-bit: one column a cycle; fp32: `pe_fp32_cycles_per_column` a column (C1,
    not the peak ratio's 4). No row streams faster than one SBUF access request, and no matmul
    takes less than a fixed minimum (C2: tiny matmuls are not cheap)."""
    floor = rows * p.pe_moving_row_min_cycles
    if fp32:
        return max(p.pe_fp32_matmul_min_cycles, p.pe_fp32_cycles_per_column * columns, floor)
    return max(p.pe_matmul_min_cycles, columns, floor)


def access_rows(r: Region) -> int:
    """Rows of an on-chip access pattern: its elements per partition over its innermost row,
    where a row runs on through outer dimensions that continue it at the same stride."""
    if not r.strides or len(r.strides) != len(r.shape):
        return 1
    dims = [(n, st) for n, st in zip(r.shape[1:], r.strides[1:]) if n != 1]   # unit dims change nothing
    if not dims:
        return 1
    shape, strides = tuple(n for n, _ in dims), tuple(st for _, st in dims)
    row, step = shape[-1], strides[-1]
    for n, stride in zip(reversed(shape[:-1]), reversed(strides[:-1])):
        if stride != step * row:
            break
        row *= n
    total = 1
    for n in shape:
        total *= n
    return max(1, total // max(row, 1))


@cost_rule("nc_matmul")
def matmul(rec: TraceRecord, p: CostParams) -> Cost:
    a = rec.attrs
    columns = max(min(p.pe_stationary_min, a["m"]), a["n"])
    fp32 = _is_fp32(a["dtype"]) or _is_fp32(a["moving_dtype"])
    rows = access_rows(rec.reads[1]) if len(rec.reads) > 1 else 1
    return ComputeCost("PE", (_pe_cycles(columns, fp32, p, rows) + p.pe_overhead_cycles) / p.pe_ghz)


def short_row_ns(rec: TraceRecord, p: CostParams) -> float:
    """Tensor Engine time a matmul spends because its moving rows are shorter than one access
    request (0 when the column rate or the minimum already covers them): what a profile shows."""
    if rec.opcode != "nc_matmul" or len(rec.reads) < 2:
        return 0.0
    a = rec.attrs
    columns = max(min(p.pe_stationary_min, a["m"]), a["n"])
    fp32 = _is_fp32(a["dtype"]) or _is_fp32(a["moving_dtype"])
    rows = access_rows(rec.reads[1])
    return (_pe_cycles(columns, fp32, p, rows) - _pe_cycles(columns, fp32, p)) / p.pe_ghz


@cost_rule("nc_transpose")
def transpose(rec: TraceRecord, p: CostParams) -> Cost:
    if rec.engine is Engine.VECTOR:
        return ComputeCost("DVE", _dve_ns(rec, p))
    a = rec.attrs
    columns = max(a["p"], min(p.pe_stationary_min, a["f"]))
    if _is_fp32(a["dtype"]):     # NC-v3 transpose mode: fp32 at twice the fp32 matmul rate
        cycles = _pe_cycles(columns, True, p) / p.pe_transpose_fp32_factor
    else:
        cycles = _pe_cycles(columns, False, p)
    return ComputeCost("PE", (cycles + p.pe_overhead_cycles) / p.pe_ghz)


# ----- DMA ------------------------------------------------------------------------------------

def _runs(r: Region) -> int:
    """Contiguous runs of a DMA endpoint; an on-chip run never crosses a partition."""
    run = r.contiguous_bytes
    if r.buffer in ("sbuf", "psum"):
        run = min(run, max(r.nbytes // max(r.partitions, 1), 1))
    return max(1, -(-r.nbytes // max(run, 1)))


def _dma_cost(rec: TraceRecord, p: CostParams, efficiency: float = 1.0) -> DmaCost:
    src, dst = rec.reads[0], rec.writes[0]
    descriptors = max(_runs(src), _runs(dst))
    rows = max([r.partitions for r in (src, dst) if r.buffer in ("sbuf", "psum")] or [1])
    # C3: a descriptor that writes less than a granule into HBM is a read-modify-write there
    partial = descriptors if dst.buffer in ("hbm", "shared_hbm") and \
        dst.nbytes < descriptors * p.dma_hbm_write_granule_bytes else 0
    return DmaCost(dst.nbytes, descriptors, efficiency, rows, partial)


@cost_rule("dma_copy")
def dma(rec: TraceRecord, p: CostParams) -> Cost:
    return _dma_cost(rec, p)


@cost_rule("dma_transpose")
def dma_transpose(rec: TraceRecord, p: CostParams) -> Cost:
    return _dma_cost(rec, p, p.dma_transpose_efficiency)


# ----- placement: which queue issues a DMA, which engines an unplaced copy may use ----------

# the two hardware DGE instances of a NeuronCore-v3, each triggered from one engine's sequencer
# (nki-dge.rst: "Each TRN2 NeuronCore has two DGE instances", triggered by the Scalar Engine or
# the Sync Engine); `engine=` of dma_copy picks one, else the compiler does
DGE_QUEUES = {Engine.SYNC: "DGE-SP", Engine.SCALAR: "DGE-ACT"}
DGE_MODE_NONE, DGE_MODE_SWDGE = 0, 1


def dma_issue_queues(rec: TraceRecord, dge: bool, default_queues: tuple[str, ...]) -> tuple[str, ...]:
    """Where a DMA may be issued. Static descriptors (--disable-dge or dge_mode=none): one cheap
    issue queue. Software DGE: the GpSimd engine. Hardware DGE: the DGE of the engine `engine=`
    names, else either, whichever frees first (the compiler picks the engine)."""
    mode = rec.attrs.get("dge_mode")
    if not dge or mode == DGE_MODE_NONE:
        return ("DMA-issue",)
    if mode == DGE_MODE_SWDGE:
        return ("POOL",)
    engine = rec.attrs.get("issue_engine")
    if engine in DGE_QUEUES:
        return (DGE_QUEUES[engine],)
    return default_queues


def dma_issue_ns(cost: DmaCost, p: CostParams, dge: bool) -> float:
    """A hardware DGE takes about 600 ns a DMA (documented; fitted per partition row on B1 and
    B2). It builds descriptors per partition row, not per element, so an element-granular
    gather into SBUF issues like any DMA (C3's contrast)."""
    return (p.dge_issue_ns + p.dge_issue_per_row_ns * cost.rows) if dge else p.static_issue_ns


BALANCED_QUEUES = ("DVE", "ACT")


def balanced_copy(rec: TraceRecord, auto_default: bool) -> bool:
    """C4: the compiler spreads SBUF copies whose engine the kernel left open over the Vector and
    Scalar engines. PSUM evictions stay on the Scalar engine, where P3 measured them."""
    if rec.opcode != "tensor_copy" or not rec.attrs.get("auto_engine", auto_default):
        return False
    return all(r.buffer == "sbuf" for r in rec.reads)


def copy_ns(rec: TraceRecord, queue: str, p: CostParams) -> float:
    engine = Engine.VECTOR if queue == "DVE" else Engine.SCALAR
    return _BY_ENGINE[engine](rec, p)

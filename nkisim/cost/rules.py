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
    run_elements: float = float("inf")  # elements in each run when an on-chip side sets the runs
    store: bool = False     # from on chip into HBM (its start latency may differ from a load's)
    on_chip_rows: int = 0   # partition rows of the on-chip side (0: HBM to HBM)


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

def _inner_contiguous(r: Region) -> bool:
    """The innermost free dimension of more than one element is physically contiguous."""
    if not r.strides or len(r.strides) != len(r.shape):
        return False
    for n, stride in zip(reversed(r.shape[1:]), reversed(r.strides[1:])):
        if n != 1:
            return stride == r.itemsize
    return True


def dve_perf_factor(rec: TraceRecord) -> int:
    """The Vector engine's 16-bit performance mode (Trainium2 arch guide, "Vector Engine
    Performance Mode"): tensor_copy and tensor_scalar stream 4x the elements with 16-bit
    operands in SBUF, innermost dimension contiguous; 2x when not contiguous, or contiguous
    with one side in PSUM. tensor_tensor's documented 2x is left out: the profiles' only
    all-16-bit SBUF tensor_tensor (conv-a/b fp16, 14 el., n = 180) takes as long as fp32's.
    tensor_scalar_reduce is tensor_scalar's pass plus a reduction (its documented cost is
    tensor_scalar's plus MIN_II), so its pass gets tensor_scalar's mode (inferred)."""
    if rec.opcode not in ("tensor_copy", "tensor_scalar", "tensor_scalar_reduce") or not rec.reads or not rec.writes:
        return 1
    ends = (rec.reads[0], rec.writes[0])
    if not all(_is_16bit(r.dtype) for r in ends):
        return 1
    contiguous = all(_inner_contiguous(r) for r in ends)
    if all(r.buffer == "sbuf" for r in ends):
        return 4 if contiguous else 2
    return 2 if contiguous and sum(r.buffer == "psum" for r in ends) == 1 else 1


def dve_ns(rec: TraceRecord, p: CostParams) -> float:
    """How long the instruction holds the Vector engine (its occupancy; the result lands
    `dve_pipeline_ns` later): (N + 64) cycles, N the largest operand's elements per partition
    (a broadcast operand streams at full length), in fp32 and 16-bit, SBUF and PSUM alike
    (bench/profiles.py: back-to-back completion spacing), N / 4 or N / 2 in performance mode;
    never faster than its 16-bit PSUM operands are read (_psum_16bit_ns)."""
    return max(_dve_stream_ns(rec, p), _psum_16bit_ns(rec, p)) + p.dve_overhead_cycles / p.dve_ghz


def _dve_stream_ns(rec: TraceRecord, p: CostParams) -> float:
    """The Vector engine's time to stream the instruction's elements, in its mode."""
    factor = dve_perf_factor(rec) if p.dve_perf_mode else 1
    return rec.elements_per_partition * p.dve_cycles_per_element / factor / p.dve_ghz


def _act_stream_ns(rec: TraceRecord, p: CostParams) -> float:
    """The Scalar engine's time to stream the instruction's elements, in its mode."""
    return rec.elements_per_partition / act_perf_factor(rec, p) / p.act_ghz


def _psum_16bit_ns(rec: TraceRecord, p: CostParams) -> float:
    """The least time a Vector or Scalar instruction takes to read its 16-bit PSUM operands (a
    16-bit transpose's result; matmuls leave fp32): `psum_16bit_ns_per_element` an element a
    partition, measured on conv-a/b's fp16 PSUM->SBUF copies, 2.3x fp32's time where the
    performance mode would have halved it. 0 without such an operand. 16-bit means 2-byte
    elements, whatever dtype names them: the same bits read through an int16 view pay too."""
    n = max((r.elements_per_partition for r in rec.reads if r.buffer == "psum" and r.itemsize == 2), default=0)
    return n * p.psum_16bit_ns_per_element


def psum_16bit_extra_ns(rec: TraceRecord, engine: str, p: CostParams) -> float:
    """How much longer `rec` holds `engine` ("DVE" or "ACT") because it reads 16-bit PSUM
    operands (_psum_16bit_ns) than its elements would take it to stream: what a profile shows."""
    floor = _psum_16bit_ns(rec, p)
    if floor == 0.0 or engine not in ("DVE", "ACT"):
        return 0.0
    stream = _dve_stream_ns(rec, p) if engine == "DVE" else _act_stream_ns(rec, p)
    return max(0.0, floor - stream)


def act_perf_factor(rec: TraceRecord, p: CostParams) -> int:
    """NeuronCore-v4's Scalar engine streams twice the 16-bit elements of other dtypes [A4] (its
    perf mode for tensor_scalar and tensor_copy); 1 on the generations before it."""
    if p.act_perf_factor_16bit == 1 or rec.opcode not in ("tensor_copy", "tensor_scalar") \
            or not rec.reads or not rec.writes:
        return 1
    return p.act_perf_factor_16bit if all(_is_16bit(r.dtype) for r in (rec.reads[0], rec.writes[0])) else 1


def _act_ns(rec: TraceRecord, p: CostParams) -> float:
    """How long the instruction holds the Scalar engine: (N + 60) cycles at 1.2 GHz (the
    profiles' back-to-back PSUM copies), never faster than its 16-bit PSUM operands are read
    (_psum_16bit_ns); the result lands `act_pipeline_ns` later."""
    return max(_act_stream_ns(rec, p), _psum_16bit_ns(rec, p)) + p.act_overhead_cycles / p.act_ghz


def pipeline_ns(queue: str, p: CostParams) -> float:
    """From an instruction's end of occupancy to its result (DVE and ACT pipeline their
    instructions: the next one starts while this one is still in flight); 0 elsewhere."""
    engine = queue.split(":")[0]
    return p.dve_pipeline_ns if engine == "DVE" else p.act_pipeline_ns if engine == "ACT" else 0.0


def _pool_ns(rec: TraceRecord, p: CostParams) -> float:
    n = max((r.elements_per_partition for r in rec.reads + rec.writes), default=0)
    return (n + p.pool_overhead_cycles) / p.pool_ghz


_BY_ENGINE = {Engine.VECTOR: dve_ns, Engine.SCALAR: _act_ns, Engine.GPSIMD: _pool_ns}


@cost_rule("tensor_copy", "tensor_tensor", "tensor_scalar", "tensor_reduce", "memset", "activation",
           "iota", "affine_select", "tensor_partition_reduce")
# one pass over the data: the SDK 2.26 reference gives bn_stats max(MIN_II, N) Vector cycles and
# max8 / nc_find_index8 N cycles, the form of tensor_tensor's; nc_match_replace8's "min(MIN_II, N)"
# is read as max(MIN_II, N), like every other Vector formula (a min would cap any N at 64 cycles)
@cost_rule("bn_stats", "max8", "nc_find_index8", "nc_match_replace8")
# sequence_bounds, nonzero_with_count: no cost documented (SDK 2.26, NKI 0.6); GpSimd streams the
# larger of its operands' rows (2n bounds; n + 1 indices and count) at its rate
@cost_rule("sequence_bounds", "nonzero_with_count")
# dropout: SDK 2.26 reference, max(MIN_II, N) Vector cycles (tensor_copy's form); range_select and
# select_reduce: no cost found in the 2.26 or 0.6 reference, so one pass over what they read
@cost_rule("dropout", "range_select", "select_reduce")
def elementwise(rec: TraceRecord, p: CostParams) -> Cost:
    return ComputeCost(QUEUE_OF_ENGINE[rec.engine], _BY_ENGINE[rec.engine](rec, p))


# ----- the later Vector instructions: their documented formulas on the profiles' basis -----------
#
# The SDK 2.26 reference gives these instructions NC-v2 cycle formulas (max(MIN_II, N), 2N, 8N,
# 13N/3, + MIN_II). The instructions that have both a formula and a Trn2 profile (tensor_copy's
# max(MIN_II, N), tensor_tensor's max(MIN_II, N) with an operand in PSUM and max(MIN_II, 2N) with
# two fp32 SBUF inputs) all hold DVE one cycle per element of their largest operand: the doc's
# 2N of two streamed inputs is N on NC-v3, its N of one input is N. So each formula below keeps
# its form, its N counted that way (`dve_cycles_per_element` a cycle), plus the fixed occupancy
# every DVE instruction holds (`dve_overhead_cycles`); the result lands `dve_pipeline_ns` later
# (pipeline_ns). No profile has any of these instructions, so the MIN_II floors the formulas
# write stay (the profiled element-wise ones show none under 64 elements: dve_ns has none).

def _dve_cycles_ns(work_cycles: float, p: CostParams, extra_cycles: float = 0.0) -> float:
    """DVE occupancy of a documented max(MIN_II, work) cycles (+ extra) instruction."""
    return (max(p.dve_min_ii, work_cycles) + extra_cycles + p.dve_overhead_cycles) / p.dve_ghz


@cost_rule("tensor_copy_predicated")
def tensor_copy_predicated(rec: TraceRecord, p: CostParams) -> Cost:
    """SDK 2.26 tensor_copy_predicated reference: max(MIN_II, N) Vector cycles when one of src and
    predicate is in SBUF and the other in PSUM, max(MIN_II, 2N) when both are in SBUF
    (`dve_predicated_copy_sbuf_factor`), N the largest operand's elements per partition. A scalar
    src (assumed) streams only the predicate: N. No 16-bit mode: the architecture guide's is
    tensor_copy's, tensor_scalar's and tensor_tensor's. reads: predicate, dst as it was, [src]."""
    if len(rec.reads) < 2:
        return elementwise(rec, p)
    predicate, src = rec.reads[0], rec.reads[2] if len(rec.reads) > 2 else None
    both_sbuf = src is not None and src.buffer == "sbuf" and predicate.buffer == "sbuf"
    factor = p.dve_predicated_copy_sbuf_factor if both_sbuf else 1
    return ComputeCost("DVE", _dve_cycles_ns(factor * rec.elements_per_partition * p.dve_cycles_per_element, p))


@cost_rule("bn_aggr")
def bn_aggr(rec: TraceRecord, p: CostParams) -> Cost:
    """SDK 2.26 bn_aggr reference: max(MIN_II, 13 * (N / 3)) Vector cycles, N the input's
    elements per partition (its largest operand, counted as the other formulas' N): 13 cycles
    a (count, mean, variance * count) triple, `dve_bn_aggr_cycles_per_triple`."""
    n = rec.elements_per_partition * p.dve_cycles_per_element
    return ComputeCost("DVE", _dve_cycles_ns(p.dve_bn_aggr_cycles_per_triple * n / 3, p))


# ----- fused Vector arithmetic and scans (nkisim.instructions.vector_fused) -------------------------


@cost_rule("scalar_tensor_tensor")
def scalar_tensor_tensor(rec: TraceRecord, p: CostParams) -> Cost:
    """SDK 2.26 scalar_tensor_tensor reference: 2N Vector cycles, two streamed inputs as
    tensor_tensor's 2N, so N on the profiles' basis (one cycle per element of the largest
    operand); half that in the documented fast case, N for 2N: data and operand1 bfloat16 in
    SBUF, op0 subtract, op1 multiply, N even. No MIN_II is written for it. The ops are read from
    params, which decide the values too."""
    data, other = rec.reads[0], rec.reads[1]
    n = data.elements_per_partition
    fast = (rec.params.get("op0") == "subtract" and rec.params.get("op1") == "multiply" and n % 2 == 0
            and all(r.dtype == "bfloat16" and r.buffer == "sbuf" for r in (data, other)))
    cycles = rec.elements_per_partition * p.dve_cycles_per_element / (2 if fast else 1)
    return ComputeCost("DVE", (cycles + p.dve_overhead_cycles) / p.dve_ghz)


@cost_rule("tensor_tensor_scan")
def tensor_tensor_scan(rec: TraceRecord, p: CostParams) -> Cost:
    """SDK 2.26 tensor_tensor_scan reference: max(MIN_II, 2N) Vector cycles whatever the dtypes
    (no fast case is documented for a scan): two streamed inputs, as tensor_tensor's 2N, so
    max(MIN_II, N) on the profiles' basis, N the largest operand."""
    return ComputeCost("DVE", _dve_cycles_ns(rec.elements_per_partition * p.dve_cycles_per_element, p))


@cost_rule("tensor_scalar_reduce")
def tensor_scalar_reduce(rec: TraceRecord, p: CostParams) -> Cost:
    """SDK 2.26 tensor_scalar_reduce reference: max(MIN_II, N) + MIN_II Vector cycles, i.e.
    tensor_scalar's cost (max(MIN_II, N), which the profiles show as dve_ns's occupancy) and one
    MIN_II more for the reduction. The accumulator registers are engine state, not traffic: the
    16-bit mode follows data and the result only (dve_perf_factor)."""
    return ComputeCost("DVE", dve_ns(rec, p) + p.dve_min_ii / p.dve_ghz)


@cost_rule("tensor_scalar_cumulative")
def tensor_scalar_cumulative(rec: TraceRecord, p: CostParams) -> Cost:
    """No cost is documented (0.6 only, whose reference has no cycle formulas): assumed one pass
    over the source, as tensor_tensor_scan's max(MIN_II, N) on the profiles' basis (a running
    value has no fast case)."""
    return ComputeCost("DVE", _dve_cycles_ns(rec.elements_per_partition * p.dve_cycles_per_element, p))


@cost_rule("reciprocal")
def reciprocal(rec: TraceRecord, p: CostParams) -> Cost:
    """The Vector engine's reciprocal is more precise than the Scalar engine's activation
    (op=nl.reciprocal) and about 8x slower for large tiles (0.6 reference; 2.26: max(MIN_II, 8N)
    Vector cycles): `dve_reciprocal_act_factor` times the Scalar engine's per-element time (one
    element of the largest operand a cycle at its clock, _act_ns), above MIN_II, plus the fixed
    DVE occupancy. Small tiles are nearer each other than 8x: the fixed costs dominate."""
    n = rec.elements_per_partition
    ns = max(p.dve_min_ii / p.dve_ghz, p.dve_reciprocal_act_factor * n / p.act_ghz)
    return ComputeCost("DVE", ns + p.dve_overhead_cycles / p.dve_ghz)


# ----- cross-partition movement and gathers (nkisim.instructions.gather) ----------------------------

@cost_rule("nc_stream_shuffle")
def stream_shuffle(rec: TraceRecord, p: CostParams) -> Cost:
    """SDK 2.26 nc_stream_shuffle reference: max(MIN_II, N) Vector cycles, N the elements per
    partition of src (reads[0]), one a cycle as the profiles show a one-input pass (no 16-bit
    mode: the architecture guide names tensor_copy, tensor_scalar and tensor_tensor); dst, read
    only to keep the partitions a 255 entry leaves unchanged, adds nothing."""
    return ComputeCost("DVE", _dve_cycles_ns(rec.reads[0].elements_per_partition * p.dve_cycles_per_element, p))


@cost_rule("nc_n_gather")
def n_gather(rec: TraceRecord, p: CostParams) -> Cost:
    """nc_n_gather reference (SDK 2.27+, NKI 0.6): n = ceil(N / 512) underlying GpSimd
    instructions, N the elements per partition gathered; each pays GPSIMD_START, and the N
    elements stream at GpSimd's rate (one a cycle, as _pool_ns)."""
    n = rec.writes[0].elements_per_partition
    instructions = max(1, -(-n // p.pool_n_gather_elements))
    return ComputeCost("POOL", (n + instructions * p.pool_overhead_cycles) / p.pool_ghz)


@cost_rule("topk")
def topk(rec: TraceRecord, p: CostParams) -> Cost:
    """nisa.topk reference (NKI 0.6): 4*n + K GpSimd cycles, n the active snake elements and K
    the results (every group of 16 partitions on its own GpSimd core, in parallel), plus
    GPSIMD_START as every GpSimd instruction pays."""
    n, k = rec.params.get("n", 0), rec.params.get("k", 0)
    return ComputeCost("POOL", (4 * n + k + p.pool_overhead_cycles) / p.pool_ghz)


# ----- random bits (nkisim.instructions.random_bits) -----------------------------------------------

@cost_rule("rng", "set_rng_seed", "rand_set_state", "rand_get_state")
def random_bits(rec: TraceRecord, p: CostParams) -> Cost:
    """No cost is documented for rng, set_rng_seed, rand_set_state or rand_get_state (NKI 0.6
    reference). Assumed: rng is one pass writing dst's elements per partition, the form of
    the documented one-pass Vector instructions (max(MIN_II, N), one element a cycle as the
    profiles show whatever the dtype; GpSimd N + GPSIMD_START); the generator state it reads
    and writes is engine state, not traffic. set_rng_seed reads one element: one minimal Vector
    instruction (MIN_II plus the fixed occupancy). rand_set_state and
    rand_get_state move the 6 state words a partition: one GpSimd pass of N = 6 (their first
    write, the state rows or dst) plus GPSIMD_START."""
    n = rec.writes[0].elements_per_partition if rec.opcode != "set_rng_seed" and rec.writes else 1
    if rec.engine is Engine.GPSIMD:
        return ComputeCost("POOL", (n + p.pool_overhead_cycles) / p.pool_ghz)
    return ComputeCost("DVE", _dve_cycles_ns(n * p.dve_cycles_per_element, p))


@cost_rule("core_barrier")
def core_barrier(rec: TraceRecord, p: CostParams) -> Cost:
    """A semaphore handshake between the cores' engines (assumed one semaphore hop; its waiting
    is the records it depends on, attrs["after"])."""
    return ComputeCost(QUEUE_OF_ENGINE[rec.engine], p.semaphore_ns)


@cost_rule("sendrecv")
def sendrecv(rec: TraceRecord, p: CostParams) -> Cost:
    """SBUF to the other core's SBUF: a DMA of the tile (assumed; the GpSimd DMA variant streams
    on the GpSimd engine like its other data movement)."""
    if rec.engine is Engine.GPSIMD:
        return ComputeCost("POOL", _pool_ns(rec, p))
    return _dma_cost(rec, p)


@cost_rule("register_store")
def register_store(rec: TraceRecord, p: CostParams) -> Cost:
    """No cost is documented (NKI 0.6 reference). Assumed: one DMA descriptor moving the
    element, a partial write when it lands in HBM (C3)."""
    dst = rec.writes[0]
    partial = 1 if dst.buffer in ("hbm", "shared_hbm") and dst.nbytes < p.dma_hbm_write_granule_bytes else 0
    return DmaCost(dst.nbytes, 1, 1.0, 1, partial)


@cost_rule("register_load")
def register_load(rec: TraceRecord, p: CostParams) -> Cost:
    """No cost is documented (NKI 0.6 reference). Assumed, as register_store: one DMA descriptor
    moving the element; what waits for the register waits for this transfer (nkisim.sequencer)."""
    return DmaCost(rec.reads[0].nbytes, 1, 1.0, 1, 0)


@cost_rule("loop_begin", "loop_end", "while_begin", "while_end", "register_move")
def sequencer_control(rec: TraceRecord, p: CostParams) -> Cost:
    """Never timed: nkisim.sequencer runs these and leaves only the instructions they reach in the
    trace (the branches' own time is not modelled, docs/cost-model.md)."""
    return ComputeCost("SP", 0.0)


@cost_rule("shared_constant")
def shared_constant(rec: TraceRecord, p: CostParams) -> Cost:
    """Loaded with the kernel's binary (nl.shared_constant: "embedded in the binary"), before it runs."""
    return ComputeCost("SP", 0.0)


@cost_rule("device_print")
def device_print(rec: TraceRecord, p: CostParams) -> Cost:
    """Debug output the simulator shows; nothing a timed kernel pays for (assumed)."""
    return ComputeCost("SP", 0.0)


# ----- Tensor Engine --------------------------------------------------------------------------

def _pe_cycles(columns: int, fp32: bool, p: CostParams) -> float:
    """Tensor Engine cycles of a matmul streaming `columns` moving columns. 16-bit: one column a
    cycle; fp32: `pe_fp32_cycles_per_column` a column. No matmul takes less than a fixed minimum
    (the profiles' N = 14 matmuls; C2: tiny matmuls are not cheap). How the moving columns lie
    in SBUF does not matter: the conv-c/d profiles' windows of 30 rows of 14 columns issue at the
    column rate (bench/profiles.py)."""
    if fp32:
        return max(p.pe_fp32_matmul_min_cycles, p.pe_fp32_cycles_per_column * columns)
    return max(p.pe_matmul_min_cycles, columns)


@cost_rule("nc_matmul")
def matmul(rec: TraceRecord, p: CostParams) -> Cost:
    a = rec.attrs
    columns = max(min(p.pe_stationary_min, a["m"]), a["n"])
    fp32 = _is_fp32(a["dtype"]) or _is_fp32(a["moving_dtype"])
    return ComputeCost("PE", (_pe_cycles(columns, fp32, p) + p.pe_overhead_cycles) / p.pe_ghz)


@cost_rule("nc_transpose")
def transpose(rec: TraceRecord, p: CostParams) -> Cost:
    if rec.engine is Engine.VECTOR:
        return ComputeCost("DVE", dve_ns(rec, p))
    a = rec.attrs
    columns = max(a["p"], min(p.pe_stationary_min, a["f"]))
    if _is_fp32(a["dtype"]):     # NC-v3 transpose mode: fp32 at twice the fp32 matmul rate
        cycles = _pe_cycles(columns, True, p) / p.pe_transpose_fp32_factor
    else:
        cycles = max(p.pe_transpose_min_cycles, _pe_cycles(columns, False, p))
    return ComputeCost("PE", (cycles + p.pe_overhead_cycles) / p.pe_ghz)


@cost_rule("nc_matmul_mx")
def matmul_mx(rec: TraceRecord, p: CostParams) -> Cost:
    """[A4]: an MX matmul runs at 4x a BF16 matmul's throughput, the array presenting 512x128
    (each PE multiplies and adds the four values of an x4 element a cycle). So a moving x4
    column streams at the BF16 column rate (one a cycle) carrying four times the MACs, and an
    nc_matmul_mx of N moving x4 columns holds the PE as a 16-bit nc_matmul of N columns does
    (_pe_cycles: its minimum and overhead), from the operand regions
    (data first: stationary, moving)."""
    stationary, moving = rec.reads[0], rec.reads[1]
    columns = max(min(p.pe_stationary_min, stationary.elements_per_partition), moving.elements_per_partition)
    cycles = _pe_cycles(columns, False, p)
    return ComputeCost("PE", (cycles + p.pe_overhead_cycles) / p.pe_ghz)


@cost_rule("quantize_mx")
def quantize_mx(rec: TraceRecord, p: CostParams) -> Cost:
    """[A4]: QuantizeMX streams `dve_quantize_mx_elements_per_cycle` source elements a partition a
    cycle (its 4x performance mode), plus the fixed occupancy of every DVE instruction (dve_ns's
    form, N the source's elements per partition)."""
    n = rec.reads[0].elements_per_partition
    return ComputeCost("DVE", (n * p.dve_cycles_per_element / p.dve_quantize_mx_elements_per_cycle
                               + p.dve_overhead_cycles) / p.dve_ghz)


@cost_rule("exponential")
def exponential(rec: TraceRecord, p: CostParams) -> Cost:
    """[A4]: 4x the throughput of the Scalar engine's activation(op=nl.exp). That one streams an
    element a cycle at act_ghz (_act_ns: activation has no 16-bit mode), so the Vector engine
    holds N / (act_ghz * dve_exp_act_speedup) ns for N elements a partition, plus the fixed DVE
    occupancy (dve_ns's); the max subtraction and the row sum are fused into the same pass."""
    n = rec.elements_per_partition
    return ComputeCost("DVE", n / (p.act_ghz * p.dve_exp_act_speedup) + p.dve_overhead_cycles / p.dve_ghz)


@cost_rule("rand2")
def rand2(rec: TraceRecord, p: CostParams) -> Cost:
    """[A4]: `dve_rand2_values_per_cycle` 32-bit values a lane a cycle; otherwise rng's form (one
    pass writing dst, above MIN_II, plus the fixed occupancy: random_bits)."""
    n = rec.writes[0].elements_per_partition
    return ComputeCost("DVE", _dve_cycles_ns(n * p.dve_cycles_per_element / p.dve_rand2_values_per_cycle, p))


@cost_rule("activate2")
def activate2(rec: TraceRecord, p: CostParams) -> Cost:
    """No cost is documented: Activation2 is activation's pipeline with other tensor-scalar and
    reduction stages [A4], assumed to hold the Scalar engine as activation does (_act_ns)."""
    return ComputeCost("ACT", _act_ns(rec, p))


# ----- DMA ------------------------------------------------------------------------------------

def _runs(r: Region) -> int:
    """Contiguous runs of a DMA endpoint; an on-chip run never crosses a partition."""
    run = r.contiguous_bytes
    if r.buffer in ("sbuf", "psum"):
        run = min(run, max(r.nbytes // max(r.partitions, 1), 1))
    return max(1, -(-r.nbytes // max(run, 1)))


def _dma_cost(rec: TraceRecord, p: CostParams, efficiency: float = 1.0) -> DmaCost:
    src, dst = rec.reads[0], rec.writes[0]
    runs = {id(src): _runs(src), id(dst): _runs(dst)}
    descriptors = max(runs.values())
    on_chip_rows = max([r.partitions for r in (src, dst) if r.buffer in ("sbuf", "psum")] or [0])
    rows = on_chip_rows or 1
    # C3: a descriptor that writes less than a granule into HBM is a read-modify-write there
    partial = descriptors if dst.buffer in ("hbm", "shared_hbm") and \
        dst.nbytes < descriptors * p.dma_hbm_write_granule_bytes else 0
    # conv-a/b's weights: runs of a few elements on chip cost their element writes (dma_run_element_ns)
    on_chip = [r for r in (src, dst) if r.buffer in ("sbuf", "psum") and runs[id(r)] == descriptors]
    run_elements = min((r.nbytes / descriptors / max(r.itemsize, 1) for r in on_chip), default=float("inf"))
    store = src.buffer in ("sbuf", "psum") and dst.buffer in ("hbm", "shared_hbm")
    return DmaCost(dst.nbytes, descriptors, efficiency, rows, partial, run_elements, store, on_chip_rows)


@cost_rule("dma_copy")
def dma(rec: TraceRecord, p: CostParams) -> Cost:
    return _dma_cost(rec, p)


@cost_rule("dma_transpose")
def dma_transpose(rec: TraceRecord, p: CostParams) -> Cost:
    return _dma_cost(rec, p, p.dma_transpose_efficiency)


@cost_rule("dma_compute")
def dma_compute(rec: TraceRecord, p: CostParams) -> Cost:
    """NKI 0.6 dma_compute (dst = the sum of k sources): no cost is documented. Assumed: the DMA
    engines read each source once and write dst once, so the transfer moves the sources' bytes
    (at least dst's) in each source's descriptors against dst's, as k copies into one
    destination would, but is issued once; its descriptors are prebuilt (DGE mode none, as the
    0.6 reference says the compiler assigns the static form), so the issue is the static one."""
    dst = rec.writes[0]
    dst_runs = _runs(dst)
    runs = [_runs(src) for src in rec.reads] or [dst_runs]
    descriptors = sum(max(n, dst_runs) for n in runs)
    nbytes = max(sum(r.nbytes for r in rec.reads), dst.nbytes)
    rows = max([r.partitions for r in rec.reads + rec.writes if r.buffer in ("sbuf", "psum")] or [1])
    writes = max(runs + [dst_runs])     # C3's read-modify-write rule, on dst's descriptors (written once)
    partial = writes if dst.buffer in ("hbm", "shared_hbm") and \
        dst.nbytes < writes * p.dma_hbm_write_granule_bytes else 0
    return DmaCost(nbytes, descriptors, 1.0, rows, partial)


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
    """C4, C6: the compiler spreads SBUF copies whose engine the kernel left open over the Vector
    and Scalar engines. PSUM evictions stay on the Scalar engine, where P3 measured them."""
    if rec.opcode != "tensor_copy" or not rec.attrs.get("auto_engine", auto_default):
        return False
    return all(r.buffer == "sbuf" for r in rec.reads)


def copy_ns(rec: TraceRecord, queue: str, p: CostParams) -> float:
    engine = Engine.VECTOR if queue == "DVE" else Engine.SCALAR
    return _BY_ENGINE[engine](rec, p)

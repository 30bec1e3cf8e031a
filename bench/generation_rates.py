"""Peak rates of each NeuronCore generation's model, measured by micro-kernels of our own and
set against the figures the Neuron docs give (shared/docs/neuroncore-generations.md, tags in
brackets: [A2] [A3] [A4] the NKI architecture guides of NC-v2/v3/v4, [C2] [C3] [C4] the
NeuronCore pages, [DMA] the DMA bandwidth guide, [MM] the nc_matmul reference). Prints figures,
asserts nothing (--check: exit 1 when a compared rate is more than 5% off its documented figure).

Each rate is measured the way one would on hardware: a kernel that repeats one instruction
`count` times and the same kernel repeating it 2 x `count` times, both run by nkisim under the
generation's rules (SimSettings(platform=...)) and timed by its cost model (cost.estimate, which
takes the run's platform); the work of the extra `count` instructions over the extra time is the
rate, so the fixed costs (loading operands, the kernel's overhead, the final store) cancel.

- Tensor Engine: back-to-back nc_matmul of a 128x128 stationary by a 128x512 moving tile
  (the largest a float32 PSUM bank takes) accumulating into one bank, 2 x 128 x 128 x 512 FLOPs
  each, per dtype (fp32, bf16, fp16, fp8 e4m3); from NC-v3 on also fp8 with perf_mode=double_row
  (shown as refused while nkisim does not simulate it), on NC-v4 nc_matmul_mx of MXFP8 x4 tiles
  quantized on chip (four values an element: 4x the MACs a column).
- DMA: HBM->SBUF loads of 128 partitions x 4 KiB ("at least 4 KiB a partition saturates" [DMA])
  into 16 rotating SBUF slots, bytes moved per ns.
- Vector Engine: tensor_tensor (add) and tensor_scalar (multiply) over 32 KiB a partition in
  SBUF (8192 fp32 or 16384 bf16 elements), elements per ns across the 128 lanes.
- Scalar Engine: tensor_copy on the Scalar engine, the same tiles (NC-v4's 2x 16-bit mode [A4]).

    python bench/generation_rates.py [--platform trn1 ...] [--check]
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nkisim  # noqa: E402

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.errors import NKISimError  # noqa: E402
from nkisim.platforms import PLATFORMS, rules_for  # noqa: E402
from nkisim.settings import SimSettings  # noqa: E402

TOLERANCE = 0.05          # the target: a documented rate reproduced within 5%
PARTITIONS = 128
MOVING = 512              # moving columns of one matmul: a float32 PSUM bank (2 KiB a partition)
TILE_BYTES = 32 * 1024    # a Vector/Scalar operand a partition: the fixed ~64 cycles are ~1% of it
DMA_ROW_BYTES = 4096      # a DMA's bytes a partition ([DMA]: >= 4 KiB a partition saturates)
DMA_SLOTS = 16            # SBUF slots the loads rotate through (64 KiB a partition: fits trn1's 176 KiB)
COUNT = {"matmul": 64, "dma": 32, "vector": 16}

DTYPES = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8": ml_dtypes.float8_e4m3fn}


# ----- the documented figures, per core ------------------------------------------------------------

@dataclass(frozen=True)
class Documented:
    value: float | None         # None: the docs give no figure for it
    source: str


# Tensor Engine peak TFLOPS a core
PE_TFLOPS = {
    "trn1": {"fp32": Documented(23, "[A2] (chip 47.5 / 2 = 23.75 [T1])"),
             "bf16": Documented(92, "[A2] (\"over 90\" [C2])"),
             "fp16": Documented(92, "[A2]"),
             "fp8": Documented(92, "[A2][MM]: cFP8 at the BF16 rate, no perf mode on NC-v2")},
    "trn2": {"fp32": Documented(20, "[A3][C3]"),
             "bf16": Documented(79, "[A3][C3]"),
             "fp16": Documented(79, "[A3][C3]"),
             # 158 is FP8 with perf_mode=double_row [A3][C3][MM]; without it the 2x128 datapath of BF16
             "fp8": Documented(79, "[A3][MM]: the BF16 rate without perf_mode"),
             "fp8_double_row": Documented(158, "[A3][C3] 158 cFP8 TFLOPS, perf_mode=double_row [MM]")},
    "trn3": {"fp32": Documented(20, "[A4][C4]"),
             "bf16": Documented(79, "[A4][C4]"),
             "fp16": Documented(79, "[A4][C4]"),
             "fp8": Documented(None, "[A4]: per-core non-MX FP8 peak not stated"),
             "fp8_double_row": Documented(None, "[MM]: double_row supported on NC-v4, no figure given"),
             "mxfp8": Documented(315, "[A4][C4] MXFP8/MXFP4, 4x BF16")},
}
# DMA: 16 engines a core [DMA][DMAO] x each engine's peak
DMA_BYTES_PER_NS = {"trn1": Documented(16 * 17, "[DMA] 17 B/ns x 16 engines = 272 GB/s"),
                    "trn2": Documented(16 * 23, "[DMA] 23 B/ns x 16 engines = 368 GB/s"),
                    "trn3": Documented(16 * 33, "[DMA] 33 B/ns x 16 engines = 528 GB/s")}
# Vector Engine: clock (GHz) x elements a cycle across the 128 lanes. The 512 of 16-bit dtypes is
# the perf mode of tensor_scalar / tensor_copy; [A3] gives tensor_tensor 2x, i.e. 256 (params.py,
# rules.dve_perf_factor, which leaves tensor_tensor's out: the Trn2 profiles show it at 1x)
VECTOR = {"trn1": {("tensor_scalar", "fp32"): Documented(1.12 * 128, "[A2] 1.12 GHz x 128 elements a cycle"),
                   ("tensor_scalar", "bf16"): Documented(1.12 * 128, "[A2] 1.12 GHz x 128 (every dtype)"),
                   ("tensor_tensor", "fp32"): Documented(1.12 * 128, "[A2] 1.12 GHz x 128"),
                   ("tensor_tensor", "bf16"): Documented(1.12 * 128, "[A2] 1.12 GHz x 128 (every dtype)")},
          "trn2": {("tensor_scalar", "fp32"): Documented(0.96 * 256, "[A3] 0.96 GHz x 256 (non-16-bit)"),
                   ("tensor_scalar", "bf16"): Documented(0.96 * 512, "[A3] 0.96 GHz x 512 BF16/FP16 (perf mode)"),
                   ("tensor_tensor", "fp32"): Documented(0.96 * 256, "[A3] 0.96 GHz x 256 (non-16-bit)"),
                   ("tensor_tensor", "bf16"): Documented(0.96 * 256, "[A3] 0.96 GHz x 256 (tensor_tensor 2x)")},
          "trn3": {("tensor_scalar", "fp32"): Documented(1.2 * 256, "[A4] 1.2 GHz x 256 (non-16-bit)"),
                   ("tensor_scalar", "bf16"): Documented(1.2 * 512, "[A4] 1.2 GHz x 512 BF16/FP16/FP8 (perf mode)"),
                   ("tensor_tensor", "fp32"): Documented(1.2 * 256, "[A4] 1.2 GHz x 256 (non-16-bit)"),
                   ("tensor_tensor", "bf16"): Documented(1.2 * 256, "[A4] 1.2 GHz x 256 (tensor_tensor 2x, "
                                                                    "as [A3])")}}
# Scalar Engine: clock x elements a cycle
SCALAR = {"trn1": {("scalar_copy", "fp32"): Documented(1.4 * 128, "[A2] 1.4 GHz x 128"),
                   ("scalar_copy", "bf16"): Documented(1.4 * 128, "[A2] 1.4 GHz x 128")},
          "trn2": {("scalar_copy", "fp32"): Documented(1.2 * 128, "[A3] 1.2 GHz x 128"),
                   ("scalar_copy", "bf16"): Documented(1.2 * 128, "[A3] 1.2 GHz x 128")},
          "trn3": {("scalar_copy", "fp32"): Documented(1.2 * 128, "[A4] 1.2 GHz x 128 (non-16-bit)"),
                   ("scalar_copy", "bf16"): Documented(1.2 * 256, "[A4] 1.2 GHz x 256 BF16/FP16/FP8 (perf mode)")}}
# the CostParams fields each rate follows from in the model (what to look at when one is off)
BASIS = {"pe_fp32": ("pe_ghz", "pe_fp32_cycles_per_column", "pe_overhead_cycles"),
         "pe_16bit": ("pe_ghz", "pe_overhead_cycles"),
         "dma": ("dma_engine_bytes_per_ns", "dma_descriptor_ns"),
         "dve": ("dve_ghz", "dve_cycles_per_element", "dve_perf_mode"),
         "act": ("act_ghz", "act_perf_factor_16bit")}


# ----- the micro-kernels -------------------------------------------------------------------------

def make_matmuls(perf_mode=None):
    """A kernel of `count` matmuls of w (stationary) by x (moving) into one PSUM bank, in
    `perf_mode` ([MM]: FP8's double_row) when given."""
    extra = {} if perf_mode is None else {"perf_mode": perf_mode}

    @nki.jit
    def matmuls(x, w, count):
        xs = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        ws = nl.ndarray(w.shape, w.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ws, src=w)
        acc = nl.ndarray((PARTITIONS, x.shape[1]), nl.float32, buffer=nl.psum)
        for _ in nl.sequential_range(count):
            nisa.nc_matmul(dst=acc, stationary=ws, moving=xs, **extra)
        return _store(acc)

    return matmuls


matmuls = make_matmuls()
double_row_matmuls = make_matmuls(nisa.matmul_perf_mode.double_row)


@nki.jit
def mx_matmuls(x, w, count):
    """`count` MXFP8 matmuls: x [128, 4 N] and w [128, 4 M] (bf16) quantized on chip into x4 tiles
    of N and M elements, their scales in the rows quantize_mx writes."""
    xs = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    ws = nl.ndarray(w.shape, w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ws, src=w)
    xq = nl.ndarray((PARTITIONS, x.shape[1] // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    x_scale = nl.ndarray((PARTITIONS, x.shape[1] // 4), nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(src=xs, dst=xq, dst_scale=x_scale)
    wq = nl.ndarray((PARTITIONS, w.shape[1] // 4), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    w_scale = nl.ndarray((PARTITIONS, w.shape[1] // 4), nl.uint8, buffer=nl.sbuf)
    nisa.quantize_mx(src=ws, dst=wq, dst_scale=w_scale)
    acc = nl.ndarray((PARTITIONS, x.shape[1] // 4), nl.float32, buffer=nl.psum)
    for _ in nl.sequential_range(count):
        nisa.nc_matmul_mx(dst=acc, stationary=wq, moving=xq, stationary_scale=w_scale, moving_scale=x_scale)
    return _store(acc)


def _store(acc):
    o = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=acc)
    out = nl.ndarray(acc.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


@nki.jit
def loads(a, count):
    """`count` loads of a[i] ([128, F]) into rotating SBUF slots; the kernel's one store does not
    wait for them, so the kernel ends when the last load does."""
    slots = nl.ndarray((PARTITIONS, DMA_SLOTS, a.shape[2]), a.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(count):
        nisa.dma_copy(dst=slots[:, i % DMA_SLOTS, :], src=a[i])
    return _small_output(a.dtype)


def _small_output(dtype):
    z = nl.ndarray((PARTITIONS, 1), dtype, buffer=nl.sbuf)
    nisa.memset(dst=z, value=0.0)
    out = nl.ndarray((PARTITIONS, 1), dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=z)
    return out


@nki.jit
def elementwise(a, count, op):
    """`count` passes of one instruction over a [128, N] SBUF tile: op "tensor_tensor" (a + a),
    "tensor_scalar" (a * 2) on the Vector engine, "scalar_copy" (tensor_copy on the Scalar engine)."""
    src = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=a)
    dst = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    for _ in nl.sequential_range(count):
        if op == "tensor_tensor":
            nisa.tensor_tensor(dst=dst, data1=src, data2=src, op=nl.add, engine=nisa.engine.vector)
        elif op == "tensor_scalar":
            nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=2.0, engine=nisa.engine.vector)
        else:
            nisa.tensor_copy(dst=dst, src=src, engine=nisa.engine.scalar)
    return _small_output(a.dtype)


# ----- measuring ----------------------------------------------------------------------------------

def kernel_ns(kernel, args, kwargs, platform: str) -> float:
    run = nkisim.run_kernel(kernel, args, kwargs, settings=SimSettings(platform=platform))
    assert run.settings.platform == platform
    return cost.estimate(run).total_ns


def rate(kernel, args, kwargs, count: int, work_each: float, platform: str) -> float:
    """Work a ns of the repeated instruction: the extra `count` repetitions' work over their time."""
    once = kernel_ns(kernel, args, dict(kwargs, count=count), platform)
    twice = kernel_ns(kernel, args, dict(kwargs, count=2 * count), platform)
    return count * work_each / (twice - once)


@dataclass
class Row:
    what: str
    unit: str
    measured: float | None      # None: the model refuses it
    documented: Documented
    basis: str = ""             # a BASIS key
    note: str = ""              # why there is no measurement

    @property
    def ratio(self) -> float | None:
        if self.measured is None or self.documented.value is None:
            return None
        return self.measured / self.documented.value

    @property
    def within(self) -> str:
        if self.ratio is None:
            return "-"
        return "yes" if abs(self.ratio - 1) <= TOLERANCE else "NO"


def measure(platform: str) -> list[Row]:
    rng = np.random.default_rng(0)
    rows = []
    flops = 2 * PARTITIONS * PARTITIONS * MOVING
    for name, dtype in DTYPES.items():
        x = rng.random((PARTITIONS, MOVING), dtype=np.float32).astype(dtype)
        w = rng.random((PARTITIONS, PARTITIONS), dtype=np.float32).astype(dtype)
        tflops = rate(matmuls, (x, w), {}, COUNT["matmul"], flops, platform) / 1e3
        rows.append(Row(f"PE nc_matmul {name}", "TFLOPS", tflops, PE_TFLOPS[platform][name],
                        "pe_fp32" if name == "fp32" else "pe_16bit"))
    if rules_for(platform).nc_version >= 3:         # double_row is NC-v3's and NC-v4's [MM]
        x = rng.random((PARTITIONS, MOVING), dtype=np.float32).astype(DTYPES["fp8"])
        w = rng.random((PARTITIONS, PARTITIONS), dtype=np.float32).astype(DTYPES["fp8"])
        try:
            tflops = rate(double_row_matmuls, (x, w), {}, COUNT["matmul"], flops, platform) / 1e3
        except NKISimError as err:     # what the model does not simulate it says so: shown as refused
            tflops, refused = None, err
        rows.append(Row("PE nc_matmul fp8 double_row", "TFLOPS", tflops, PE_TFLOPS[platform]["fp8_double_row"],
                        "pe_16bit"))
        if tflops is None:
            rows[-1].note = f"refused: {str(refused).splitlines()[0][:90]}"
    if rules_for(platform).nc_version >= 4:
        x = rng.random((PARTITIONS, 4 * MOVING), dtype=np.float32).astype(ml_dtypes.bfloat16)
        w = rng.random((PARTITIONS, 4 * PARTITIONS), dtype=np.float32).astype(ml_dtypes.bfloat16)
        tflops = rate(mx_matmuls, (x, w), {}, COUNT["matmul"], 4 * flops, platform) / 1e3
        rows.append(Row("PE nc_matmul_mx mxfp8", "TFLOPS", tflops, PE_TFLOPS[platform]["mxfp8"], "pe_16bit"))
    columns = DMA_ROW_BYTES // 4
    count = COUNT["dma"]
    a = np.ones((2 * count, PARTITIONS, columns), np.float32)
    bandwidth = rate(loads, (a,), {}, count, PARTITIONS * DMA_ROW_BYTES, platform)
    rows.append(Row("DMA HBM->SBUF, 16 engines", "B/ns", bandwidth, DMA_BYTES_PER_NS[platform], "dma"))
    for label, op, table, basis in (("Vector tensor_tensor", "tensor_tensor", VECTOR, "dve"),
                                    ("Vector tensor_scalar", "tensor_scalar", VECTOR, "dve"),
                                    ("Scalar tensor_copy", "scalar_copy", SCALAR, "act")):
        for name in ("fp32", "bf16"):
            dtype = DTYPES[name]
            elements = TILE_BYTES // np.dtype(dtype).itemsize
            a = rng.random((PARTITIONS, elements), dtype=np.float32).astype(dtype)
            per_ns = rate(elementwise, (a,), {"op": op}, COUNT["vector"], PARTITIONS * elements, platform)
            rows.append(Row(f"{label} {name}", "elem/ns", per_ns, table[platform][(op, name)], basis))
    return rows


def generation_line(platform: str) -> str:
    gen = cost.generation(platform)
    chip = rules_for(platform).hardware.split(",")[0]
    state = f"calibrated on {gen.calibration}" if gen.calibrated else f"NOT calibrated against {chip} hardware"
    return f"{chip} ({gen.core}) model, platform {platform}: {state}"


def table(platform: str, rows: list[Row]) -> str:
    head = f"  {'rate':<30}{'unit':>8}{'model':>10}{'docs':>9}{'ratio':>8}  {'<=5%':<5} documented figure's source"
    lines = [generation_line(platform), head, "  " + "-" * (len(head) - 2)]
    for r in rows:
        measured = f"{r.measured:.1f}" if r.measured is not None else "refused"
        doc = f"{r.documented.value:g}" if r.documented.value is not None else "-"
        ratio = f"{r.ratio:.3f}" if r.ratio is not None else "-"
        lines.append(f"  {r.what:<30}{r.unit:>8}{measured:>10}{doc:>9}{ratio:>8}  {r.within:<5} {r.documented.source}")
    lines += [f"  {r.what}: {r.note}" for r in rows if r.note]
    off = sorted({r.basis for r in rows if r.within == "NO"})
    if off:
        lines.append("  the model's parameters behind the rates off by more than 5%:")
        for key in off:
            lines.append("    " + "; ".join(_where(platform, name) for name in BASIS[key]))
    return "\n".join(lines)


def _where(platform: str, name: str) -> str:
    """A CostParams field of the generation's model, its value and where the value comes from."""
    gen = cost.generation(platform)
    own = next((d for d in gen.differences if d.name == name), None)
    value = getattr(gen.params, name)
    if own is not None:
        return f"{name} = {value} ({own.status})"
    return f"{name} = {value} (NC-v3's, carried over)" if platform != "trn2" else f"{name} = {value}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", action="append", choices=sorted(PLATFORMS),
                        help="a generation to measure (repeatable; default: every one)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a compared rate is more than 5%% off")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    missed = 0
    for platform in args.platform or ("trn1", "trn2", "trn3"):
        rows = measure(platform)
        print(table(platform, rows))
        compared = [r for r in rows if r.ratio is not None]
        off = [r for r in compared if r.within == "NO"]
        missed += len(off)
        print(f"  {len(compared) - len(off)} of {len(compared)} documented rates within {TOLERANCE:.0%}\n")
    print(f"measured in {time.perf_counter() - start:.1f} s")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())

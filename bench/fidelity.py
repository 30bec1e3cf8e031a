"""Cost-model fidelity: predicted vs measured Trn2 latency for every calibration point.

Points are the hardware measurements of trn2-cost-model.md section 4 ("bench" = nki.benchmark
NCL p99 in the default DGE mode; "profile" = neuron-profile total_time with --disable-dge) and
the whole-kernel conv2d facts C1..C6 of trn2-conv-measurements.md, reproduced with our own
kernels of the same structure (reference_kernels/calibration.py). Prints each point's error
(target within 15%), whether it fixed a constant or is held out, and checks that every pair of
points is ordered as measured; then the facts that are bounds or placements (C3's contrast, C4,
C5); then places the reference conv2d kernels against the course thresholds.

    python bench/fidelity.py [--skip-conv] [--cross-validate] [--save errors.json] [--baseline errors.json]

Then one table per mechanism of the model (DGE issue, hazards, DMA transfer, Tensor Engine, ...)
with the facts that exercise it; with --baseline, how many points each fact moved.
--cross-validate adds each fitted fact's error with its constant refitted on the other facts
(leave one out), the figure a model change is judged by (issue 41).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import gzip
import itertools
import json
import time
from pathlib import Path

import numpy as np

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.profile import BOUNDS, bound_by, build_profile  # noqa: E402
from nkisim.cost.rules import COST_RULES, dve_ns  # noqa: E402
from nkisim.cost.scheduler import engine_ns, engines_used  # noqa: E402
from reference_kernels import calibration, conv2d_optimized, conv2d_relaxed, vector_add  # noqa: E402

STATIC = {"additional_compile_opt": "--disable-dge"}


def conv_inputs(h, w, dtype, seed=4):
    rng = np.random.default_rng(seed)
    return (rng.random((1, 256, h, w), dtype=np.float32).astype(dtype),
            rng.random((256, 256, 3, 3), dtype=np.float32).astype(dtype),
            rng.random(256, dtype=np.float32).astype(dtype))


def calibration_points():
    """(label, kernel, inputs, compile options, measurement kind, measured us)."""
    v25k = np.random.default_rng(0).random(25600, dtype=np.float32)
    v256k = np.random.default_rng(1).random(256000, dtype=np.float32)
    m1k = np.random.default_rng(2).random((1024, 1024), dtype=np.float32)
    small16, small32 = conv_inputs(32, 16, "float16"), conv_inputs(32, 16, "float32")
    large16, large32 = conv_inputs(224, 224, "float16"), conv_inputs(224, 224, "float32")
    return [
        ("B1 vector_add_tiled ROW_CHUNK=1", vector_add.make_vector_add_tiled(1), (v25k, v25k), {}, "bench", 37318),
        ("B2 vector_add_tiled ROW_CHUNK=128", vector_add.make_vector_add_tiled(128), (v25k, v25k), {}, "bench", 378),
        ("B4 vector_add_stream FREE_DIM=2", vector_add.make_vector_add_stream(2), (v25k, v25k), {}, "bench", 186),
        ("B5 vector_add_stream FREE_DIM=200", vector_add.make_vector_add_stream(200), (v25k, v25k), {}, "bench", 15),
        ("P1 stream FREE_DIM=2000 n=256k", vector_add.make_vector_add_stream(2000), (v256k, v256k), STATIC,
         "profile", 28.4),
        # measured 26.4-27.9 us across people: the midpoint
        ("P2 stream FREE_DIM=1000 n=256k", vector_add.make_vector_add_stream(1000), (v256k, v256k), STATIC,
         "profile", 27.15),
        ("B6 transpose 1024x1024", calibration.transpose_per_tile, (m1k,), {}, "bench", 86),
        ("P3 transpose 1024x1024", calibration.transpose_per_tile, (m1k,), STATIC, "profile", 46.7),
        # trn2-conv-measurements.md; C1's pool-2 runs measured the same within 0.1%
        ("C1 row-by-row N=222 fp32 224", calibration.c1_row_by_row, large32, STATIC, "bench", 3832),
        ("C1 row-by-row N=222 fp16 224", calibration.c1_row_by_row, large16, STATIC, "bench", 824),
        ("C2 tiny N=14 matmuls fp32 32x16", calibration.c2_tiny_matmuls, small32, STATIC, "profile", 555),
        ("C2 tiny N=14 matmuls fp16 32x16", calibration.c2_tiny_matmuls, small16, STATIC, "profile", 139),
        ("C3 HBM gather+DMA transp fp16 32x16", calibration.c3_hbm_gather_dma_transpose, small16, STATIC,
         "profile", 4035),
        ("C3 HBM gather+DMA transp fp32 32x16", calibration.c3_hbm_gather_dma_transpose, small32, STATIC,
         "profile", 3694),
        ("C3 HBM gather+DMA transp fp16 224", calibration.c3_hbm_gather_dma_transpose, large16, STATIC,
         "profile", 4578),
    ]


def predict(kernel, inputs, options, measurement):
    run = nkisim.run_kernel(kernel, inputs, {}, compile_options=options)
    start = time.perf_counter()
    timeline = cost.estimate(run, measurement=measurement)
    return timeline, time.perf_counter() - start


TIE = 0.10

# points that fixed a constant in nkisim/cost/params.py; the others are held out of the fit
FITTED = {"B1": "dge_issue_ns", "B2": "dge_issue_per_row_ns", "P1": "dve_cycles_per_element", "P3": "dma_descriptor_ns",
          "C1 row-by-row N=222 fp32 224": "pe_fp32_cycles_per_column",
          "M4 DVE per 16-bit PSUM copy of 128 (conv-a/b)": "psum_16bit_ns_per_element",
          "C1 row-by-row N=222 fp16 224": "pe_overhead_cycles",
          "C2 tiny N=14 matmuls fp32 32x16": "pe_fp32_matmul_min_cycles",
          "M1 PE per N=14 matmul fp16 (conv-a/b)": "pe_matmul_min_cycles",
          "M2 DMA per weight element fp16 (conv-a/b)": "dma_run_element_ns",
          "C3 HBM gather+DMA transp fp16 32x16": "dma_hbm_partial_write_ns",
          "M5 DMA per 96 B input row fp16 (conv-a/b)": "dma_row_min_ns"}

# the mechanisms of the model each fact exercises (a fact may test several); bench/fidelity.py
# prints one table per mechanism so a change to one shows where it lands
MECHANISMS = {
    "fixed overhead": ("B5", "P1", "P2", "P3", "C2"),
    "DGE issue (graded mode)": ("B1", "B2", "B4", "B5", "B6", "C5", "C3 SBUF"),
    "adjacent DMAs issued as one": ("C5", "T"),
    "DMA hazards (reuse of a buffer)": ("B1", "B2", "B4", "B6"),
    "DMA transfer: bandwidth, descriptors, chunk and element size": ("B2", "B4", "P1", "P2", "P3", "C2", "C3"),
    "DMA latency chains": ("B1", "B5", "C2"),
    "Tensor Engine": ("P3 PE", "C1", "C2", "T", "S1"),
    "Vector / Scalar engines and placement": ("P1", "P2", "P3", "C4", "C6"),
    "element-granular HBM writes": ("C3",),
    "small fp16 kernels (held out)": ("S1", "C2"),
}


def mechanisms_of(label: str) -> list[str]:
    return [m for m, prefixes in MECHANISMS.items() if any(label.startswith(p) for p in prefixes)]


def role(label: str) -> str:
    key = label if label in FITTED else label[:2]
    return f"fit ({FITTED[key]})" if key in FITTED else "held out"


class Fact:
    """One given fact and the model's prediction. `error` is predicted / measured - 1 for a
    latency; for a bound ("at most") it is how far the prediction is over it (0 when it holds)."""

    def __init__(self, label, measured, predicted, kind="latency", unit="us", role_=None):
        self.label, self.measured, self.predicted, self.kind, self.unit = label, measured, predicted, kind, unit
        self.role = role_ or role(label)

    @property
    def error(self) -> float:
        if self.kind == "bound":
            return max(0.0, self.predicted / self.measured - 1)
        return self.predicted / self.measured - 1


def report_calibration(facts: list) -> bool:
    print(f"{'point':36} {'measured us':>11} {'predicted us':>12} {'error':>7}  role")
    rows = []
    for label, kernel, inputs, options, kind, measured in calibration_points():
        timeline, _ = predict(kernel, inputs, options, kind)
        predicted = timeline.total_us
        error = predicted / measured - 1
        rows.append((label, measured, predicted))
        facts.append(Fact(label, measured, predicted))
        flag = "" if abs(error) <= 0.15 else "  <-- outside 15%"
        print(f"{label:36} {measured:11.1f} {predicted:12.1f} {error:+7.1%}  {role(label)}{flag}")
        if label.startswith("P3"):
            busy = timeline.busy_ns
            print(f"{'':36} profile detail (held out): DMA engines active {busy['DMA'] / 1e3:.1f} us (measured "
                  f"~28), PE active {busy['PE'] / 1e3:.1f} us (measured ~16.2), {timeline.dma_count} DMAs "
                  f"(measured 129), {timeline.dma_bytes / 1e6:.2f} MB (measured 8.45)")
            facts.append(Fact("P3 DMA engines active", 28.0, busy["DMA"] / 1e3, role_="held out"))
            facts.append(Fact("P3 PE active", 16.2, busy["PE"] / 1e3, role_="held out"))
    worst = max(abs(p / m - 1) for _, m, p in rows)
    crossed = [(a, b) for a, b in itertools.combinations(rows, 2) if (a[1] - b[1]) * (a[2] - b[2]) < 0]
    # measurements closer than TIE are within the spread of repeats (P2 across people 6%, C3's
    # two versions 3%, C3 fp16 vs fp32 9% with a per-element cost): their order is not a fact
    misordered = [(a, b) for a, b in crossed if max(a[1], b[1]) / min(a[1], b[1]) > 1 + TIE]
    ties = [(a, b) for a, b in crossed if (a, b) not in misordered]
    print(f"worst error {worst:.1%} (target <= 15%); pairs ordered differently from hardware: "
          f"{len(misordered)} of {len(rows) * (len(rows) - 1) // 2} (measured within {TIE:.0%}: ties, not counted)")
    for a, b in misordered:
        print(f"  misordered: {a[0]} vs {b[0]}")
    for a, b in ties:
        print(f"  crossed tie: {a[0]} ({a[1]:.0f} us) vs {b[0]} ({b[1]:.0f} us)")
    return worst <= 0.15 and not misordered


def report_bounds(facts: list) -> list:
    """Facts that are bounds or placements rather than latencies (C3's contrast, C4, C5); returns
    the bounds the model misses. C5's 3,112-DMA kernel passed in a student's hardware harness,
    which times the graded (DGE) mode; it is also shown in static mode."""
    print(f"\n{'fact (graded DGE mode unless noted)':44} {'bound us':>9} {'predicted':>10}  holds")
    large16 = conv_inputs(224, 224, "float16")
    # the SBUF-gather kernel met the relaxed threshold with pool 2; ours stores unpooled rows
    bounds = [("C3 SBUF element gather fp16 224", calibration.c3_sbuf_gather, large16, {}, 1365),
              ("C5 3-row DMAs (1,338 DMAs) fp16 224", calibration.c5_three_row_dmas, large16, {}, 1002),
              ("C5 1-row DMAs (3,112 DMAs) fp16 224", calibration.c5_one_row_dmas, large16, {}, 1002),
              ("C5 1-row DMAs, static mode", calibration.c5_one_row_dmas, large16, STATIC, 1002)]
    missed = []
    for label, kernel, inputs, options, bound in bounds:
        timeline, _ = predict(kernel, inputs, options, "bench")
        holds = timeline.total_us <= bound
        facts.append(Fact(label, bound, timeline.total_us, kind="bound", role_="held out"))
        if not holds:
            missed.append(label)
        print(f"{label:44} {bound:9d} {timeline.total_us:10.1f}  {'yes' if holds else 'NO'}")
    run = nkisim.run_kernel(calibration.c4_unplaced_copies, (np.ones((128, 64), np.float16), 8000), {})
    timeline = cost.estimate(run)
    copies = [s.queue for r, s in zip(run.trace, timeline.slots) if r.opcode == "tensor_copy"]
    dve, act = copies.count("DVE"), copies.count("ACT")
    print(f"C4 8,000 unplaced SBUF->SBUF copies: Vector {dve}, Scalar {act} ({dve / len(copies):.0%} Vector; "
          f"the compiler: ~3.2k and ~2.4k, 57% Vector)")
    facts.append(Fact("C4 Vector share of unplaced copies", 3.2 / 5.6, dve / len(copies), unit="share",
                      role_="held out"))
    # C4's kernel itself: 224x224 fp16 with 7,992 unplaced window copies (held-out hardware data:
    # predicted 24-48% too slow when every copy went to the engine that could start it first)
    run = nkisim.run_kernel(calibration.c4_window_copies, large16, {})
    timeline = cost.estimate(run)
    copies = [s.queue for r, s in zip(run.trace, timeline.slots)
              if r.opcode == "tensor_copy" and all(x.buffer == "sbuf" for x in r.reads)]
    dve, act = copies.count("DVE"), copies.count("ACT")
    busy = timeline.busy_ns
    print(f"C4 7,992 unplaced window copies, fp16 224 (graded): {timeline.total_us:.1f} us; Vector {dve}, "
          f"Scalar {act} ({dve / len(copies):.0%} Vector); busy PE {busy['PE'] / 1e3:.0f}, "
          f"DVE {busy['DVE'] / 1e3:.0f}, ACT {busy['ACT'] / 1e3:.0f} us")
    facts.append(Fact("C4 Vector share of 7,992 window copies", 3.2 / 5.6, dve / len(copies), unit="share",
                      role_="held out"))
    run = nkisim.run_kernel(c6_as_run, large16, {})
    timeline = cost.estimate(run)
    copies = [s.queue for r, s in zip(run.trace, timeline.slots) if r.opcode == "tensor_copy"]
    dve = copies.count("DVE")
    print(f"C6 4,290 copies as the hardware ran them, fp16 224 (graded): {timeline.total_us:.1f} us; Vector {dve}, "
          f"Scalar {len(copies) - dve} ({dve / len(copies):.0%} Vector; the hardware: 2,375 and 1,913, 55%)")
    facts.append(Fact("C6 Vector share of 4,290 copies", 2375 / 4288, dve / len(copies), unit="share",
                      role_="held out"))
    return missed


@nki.compiler.skip_middle_end_transformations
@nki.jit
def c6_as_run(X, W, bias):
    """trn2-conv-measurements.md C6 as the hardware ran it: per co tile, the 18 weight-slice copies
    once (the hardware did not run them per row block), then per block of two output rows the input
    rows, 18 unplaced window copies of 128 x 2 x 222 and N = 444 matmuls, a PSUM->SBUF copy, the
    bias add and one store: 4,032 copies of SBUF tiles (the hardware: ~4,030) and 258 of PSUM ones.
    (Written here, not in reference_kernels/calibration.py, by the bench that uses it.)"""
    P, K, rows = calibration.P, 3, 2
    _, C_in, H, Wd = X.shape
    n_ci, n_co = C_in // P, W.shape[0] // P
    H_out, W_out = H - K + 1, Wd - K + 1
    out = nl.ndarray((1, W.shape[0], H_out, W_out), dtype=X.dtype, buffer=nl.hbm)
    w_t = calibration.weights_by_pe_transpose(W)
    bias_sb = nl.ndarray((P, n_co, 1), dtype=bias.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(n_co):
        nisa.dma_copy(dst=bias_sb[:, co, :], src=bias.reshape((n_co, P, 1))[co])
    for co in nl.affine_range(n_co):
        w = [[nisa.tensor_copy(w_t[:, ci, k, co * P:(co + 1) * P]) for k in range(K * K)] for ci in range(n_ci)]
        for blk in nl.affine_range(H_out // rows):
            x_rows = nl.ndarray((P, n_ci, rows + K - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
            for ci in nl.affine_range(n_ci):
                nisa.dma_copy(dst=x_rows[:, ci], src=X[0, ci * P:(ci + 1) * P, blk * rows:blk * rows + rows + K - 1])
            acc = nl.zeros((P, rows, W_out), nl.float32, buffer=nl.psum)
            for ci in nl.affine_range(n_ci):
                for kh in nl.affine_range(K):
                    for kw in nl.affine_range(K):
                        window = nisa.tensor_copy(x_rows[:, ci, kh:kh + rows, kw:kw + W_out])
                        acc += nisa.nc_matmul(w[ci][kh * K + kw], window)
            res = nisa.tensor_tensor(nisa.tensor_copy(acc), bias_sb[:, co:co + 1, :], op=nl.add, dtype=X.dtype)
            nisa.dma_copy(dst=out[0, co * P:(co + 1) * P, blk * rows:(blk + 1) * rows, :], src=res)
    return out


def report_small_fp16(facts: list) -> None:
    """trn2-conv-measurements.md C3: C3's row-tiled kernel with its weights by contiguous DMAs
    and Tensor Engine transposes measured 53 us (fp16 32x16, profile). The only given latency
    of a well-pipelined small fp16 kernel; the held-out hardware data says such kernels are
    predicted 18-27% too fast (their fp32 versions within 6%)."""
    small16, small32 = conv_inputs(32, 16, "float16"), conv_inputs(32, 16, "float32")
    t16, _ = predict(calibration.c3_contiguous_weights, small16, STATIC, "profile")
    t32, _ = predict(calibration.c3_contiguous_weights, small32, STATIC, "profile")
    facts.append(Fact("S1 C3 contiguous weights fp16 32x16", 53.0, t16.total_us, role_="held out"))
    print(f"\nS1 C3's kernel, contiguous weights + PE transposes, fp16 32x16 (profile): measured 53 us, "
          f"predicted {t16.total_us:.1f} ({t16.total_us / 53 - 1:+.1%}); fp32 (not measured) {t32.total_us:.1f}")


def report_mechanisms(facts: list, baseline: dict | None) -> list:
    """One table per mechanism: the facts that exercise it, their errors, and (given a baseline
    from --save) how many points each moved. Returns the facts more than 3 points worse."""
    worse = []
    for mechanism in MECHANISMS:
        rows = [f for f in facts if mechanism in mechanisms_of(f.label)]
        if not rows:
            continue
        print(f"\n== {mechanism} ==")
        head = f"{'fact (us, or a share)':40} {'measured':>9} {'predicted':>10} {'error':>7}"
        print(head + (f" {'baseline':>9} {'moved':>7}" if baseline else "") + "  role")
        for f in rows:
            line = f"{f.label:40} {f.measured:9.4g} {f.predicted:10.4g} {f.error:+7.1%}"
            if baseline and f.label in baseline:
                before = baseline[f.label]
                moved = abs(f.error) - abs(before)
                line += f" {before:+9.1%} {moved * 100:+6.1f}p"
                if moved > 0.03 and f not in worse:
                    worse.append(f)
            elif baseline:
                line += f" {'new':>9} {'':>7}"
            flag = "  <-- outside 15%" if abs(f.error) > 0.15 else ""
            print(f"{line}  {f.role}{flag}")
        print(f"{'':40} worst |error| {max(abs(f.error) for f in rows):.1%} over {len(rows)} facts")
    return worse


THRESHOLDS = {("float32", 224): (4596, 4964), ("float16", 224): (1002, 1365),
              ("float32", 32): (110, 110), ("float16", 32): (84, 84)}


# The course's own reference kernels ran on Trn2 at about threshold / 1.2 (trn2-cost-model.md
# section 1). Their code is not ours, so these compare kernels of the same kind, not the same
# kernel; all are held out (T1 fixed the old pe_fp32_pass_cycles; C1 and C2 replaced it). Our
# relaxed kernel has C1's structure (inputs and bias reloaded per (co tile, row) pair), the
# structure the course's ~305 us gap to its optimized kernel in both dtypes points to
# (docs/cost-model.md, "T4 against C5").
COURSE_REFERENCES = [("T1 optimized float32 224x224", "optimized", "float32", 4596 / 1.2, "held out"),
                     ("T2 optimized float16 224x224", "optimized", "float16", 1002 / 1.2, "held out"),
                     ("T3 relaxed float32 224x224", "relaxed", "float32", 4964 / 1.2, "held out"),
                     ("T4 relaxed float16 224x224", "relaxed", "float16", 1365 / 1.2, "held out")]


def conv_estimates() -> dict:
    """{(kernel, dtype, size, pool): estimated us} for both reference kernels on every graded config."""
    rng = np.random.default_rng(3)
    found = {}
    for dtype, size, pool in itertools.product(("float32", "float16"), (224, 32), (1, 2)):
        h, w = (224, 224) if size == 224 else (32, 16)
        x = rng.random((1, 256, h, w), dtype=np.float32).astype(dtype)
        wt = rng.random((256, 256, 3, 3), dtype=np.float32).astype(dtype)
        bias = rng.random(256, dtype=np.float32).astype(dtype)
        for name, module in (("optimized", conv2d_optimized), ("relaxed", conv2d_relaxed)):
            run = nkisim.run_kernel(module.fused_conv2d_maxpool, (x, wt, bias), {"pool_size": pool})
            found[(name, dtype, size, pool)] = cost.estimate(run).total_us
    return found


def report_conv(facts: list) -> None:
    est = conv_estimates()
    print("\nour reference conv2d kernels vs the course's (threshold / 1.2), pool 1, batch 1")
    print(f"{'point':36} {'course us':>11} {'ours us':>12} {'error':>7}  role")
    for label, kernel, dtype, course_us, role_ in COURSE_REFERENCES:
        ours = est[(kernel, dtype, 224, 1)]
        facts.append(Fact(label, course_us, ours, role_=role_))
        print(f"{label:36} {course_us:11.1f} {ours:12.1f} {ours / course_us - 1:+7.1%}  {role_}")

    print("\nreference conv2d kernels vs the course thresholds (batch 1, C_in = C_out = 256, K = 3)")
    print(f"{'config':24} {'optimized us':>12} {'relaxed us':>11} {'opt thr':>8} {'rel thr':>8}")
    for dtype, size, pool in itertools.product(("float32", "float16"), (224, 32), (1, 2)):
        h, w = (224, 224) if size == 224 else (32, 16)
        opt, rel = THRESHOLDS[(dtype, size)]

        def tier(t):
            return "full" if t <= opt else ("95%" if t <= rel else "0")
        o, r = est[("optimized", dtype, size, pool)], est[("relaxed", dtype, size, pool)]
        print(f"{dtype} {h}x{w} pool{pool:<6} {o:9.1f} {tier(o):>4} {r:7.1f} {tier(r):>4} {opt:8d} {rel:8d}")


# the DMA-issue models the facts decide between (trn2-conv-measurements.md C5: "decide with the
# calibration points, not by assumption"); each is the built model with these constants changed
DOCUMENTED_DGE = dict(dge_default_queues=("DGE-SP", "DGE-ACT"), dge_issue_ns=600.0, dge_issue_per_row_ns=0.0,
                      dma_merge_adjacent=False)
ALTERNATIVES = {
    "as built": {},
    "no DMA merging": dict(dma_merge_adjacent=False),
    "both DGEs, 600 ns": DOCUMENTED_DGE,
    "both DGEs + 64 B HBM hazards": dict(DOCUMENTED_DGE, dma_hazard_granule_bytes=64),
}
ALTERNATIVE_FACTS = ("B1", "B2", "B4", "B5", "B6", "P3", "C2")


def report_alternatives() -> None:
    """The facts the DMA-issue choice moves, under each alternative model."""
    runs = [(label, nkisim.run_kernel(kernel, inputs, {}, compile_options=options), kind, measured, "latency")
            for label, kernel, inputs, options, kind, measured in calibration_points()
            if label.startswith(ALTERNATIVE_FACTS)]
    large16 = conv_inputs(224, 224, "float16")
    for label, kernel in (("C5 1,338 DMAs fp16 (<= 1002)", calibration.c5_three_row_dmas),
                          ("C5 3,112 DMAs fp16 (<= 1002)", calibration.c5_one_row_dmas)):
        runs.append((label, nkisim.run_kernel(kernel, large16, {}), "bench", 1002, "bound"))
    _alternatives_table("DMA issue", runs, ALTERNATIVES, 29, "{us:8.0f} us {verdict}")


def _alternatives_table(title: str, runs: list, alternatives: dict, width: int, bound_cell: str) -> None:
    """One row per fact, one column per alternative: its error, or for a bound the predicted us."""
    import dataclasses
    names = list(alternatives)
    print(f"\n{title}: the facts under each alternative (error; for a bound, the predicted us)")
    print(f"{'fact':34}" + "".join(f" {n:>{width}}" for n in names))
    for label, run, kind, measured, what in runs:
        cells = []
        for name in names:
            params = dataclasses.replace(cost.DEFAULT_PARAMS, **alternatives[name])
            us = cost.estimate(run, params, measurement=kind).total_us
            cells.append(bound_cell.format(us=us, verdict="holds" if us <= measured else "MISSED") if what == "bound"
                         else f"{us / measured - 1:+.1%}")
        print(f"{label[:34]:34}" + "".join(f" {c:>{width}}" for c in cells))


# The issue's candidate for small fp16 kernels (18-27% too fast on hardware): a per-descriptor
# cost or a minimum efficient transfer size, which hits 32-byte fp16 rows harder than 64-byte ones
SMALL_DMA_ALTERNATIVES = {"as built": {}, "min 64 B": {"dma_min_efficient_bytes": 64},
                          "min 512 B": {"dma_min_efficient_bytes": 512},
                          "min 1 KiB": {"dma_min_efficient_bytes": 1024},
                          "20 ns/descriptor": {"dma_descriptor_ns": 20.0}}
SMALL_DMA_FACTS = ("B2", "B4", "P3", "C2", "C3")


def report_small_dma_alternatives() -> None:
    """The facts a small-descriptor cost moves, under each size or cost tried."""
    runs = [(label, nkisim.run_kernel(kernel, inputs, {}, compile_options=options), kind, measured, "latency")
            for label, kernel, inputs, options, kind, measured in calibration_points()
            if label.startswith(SMALL_DMA_FACTS)]
    runs.insert(0, ("S1 C3 contiguous weights fp16 32x16", nkisim.run_kernel(
        calibration.c3_contiguous_weights, conv_inputs(32, 16, "float16"), {}, compile_options=STATIC),
        "profile", 53.0, "latency"))
    runs.append(("C3 SBUF element gather (<= 1365)", nkisim.run_kernel(
        calibration.c3_sbuf_gather, conv_inputs(224, 224, "float16"), {}), "bench", 1365, "bound"))
    _alternatives_table("small DMA descriptors", runs, SMALL_DMA_ALTERNATIVES, 17, "{us:5.0f} {verdict}")


# ----- cross-validation: each fitted fact predicted without having been seen ---------------------

# the value a fitted constant takes where no other fact speaks to it: the documented figure params.py
# names (DGE "about 600 ns" a DMA; fp32 matmuls "4x" fp16's columns), else the fitted value itself
PRIORS = {"dge_issue_ns": 600.0, "pe_fp32_cycles_per_column": 4.0}
# the refit's candidates, as multiples of the fitted value (and the prior)
GRID = (0.25, 0.5, 0.7, 1.0, 1.4, 2.0, 4.0)


def _with(params, name: str, value):
    field_type = type(getattr(params, name))
    # an integer constant (a rate, a cycle count) stays a positive integer
    return dataclasses.replace(params, **{name: max(1, int(round(value))) if field_type is int else float(value)})


# Facts of one instruction, read from the Trn2 profiles (../shared/data/trn2-profiles), against the
# cost rule's figure for the same instructions of C2's kernel (conv-a/b):
# * M1: how long the Tensor Engine spends on one N = 14 matmul, as the median interval between
#   consecutive matmul passes (opcode 0x02) while the PE runs back to back; an fp32 matmul is two
#   passes there.
# * M2: how long a DMA engine spends on one weight element: the weight DMAs' descriptors (576
#   elements each, 1152 B in fp16, 2304 B in fp32) complete every ~650-680 ns on a ring when
#   backlogged whatever the dtype, so their time goes by elements, which land apart in SBUF
#   (calibration.weights_by_pe_transpose's tap_major).
# In cross-validation they weigh in on the constants they move like any other fact; they stay out
# of the error bands (which are about whole-kernel latencies).
PROFILES = Path("/work/shared/data/trn2-profiles")        # as bench/profiles.py's DATA_DIRS
WEIGHT_ELEMENTS = 576                                      # a weight descriptor's elements (128 x 9 / 2)


@functools.lru_cache(maxsize=None)
def _profile_rows(pids: tuple[str, ...]):
    """The rows of the named profiles (read once: several facts use each); None without the
    data files."""
    out = []
    for pid in pids:
        path = PROFILES / f"{pid}.jsonl.gz"
        if not path.exists():
            return None
        with gzip.open(path, "rt") as fh:
            out.append([json.loads(line) for line in fh][1:])
    return out


def _conv_ab(dtype: str) -> tuple[str, ...]:
    return (f"conv-a-{dtype}-32x16-pool1", f"conv-b-{dtype}-32x16-pool1")


def _conv_cd(dtype: str) -> tuple[str, ...]:
    return (f"conv-c-{dtype}-32x16-pool1", f"conv-d-{dtype}-32x16-pool1")


def profile_matmul_us(pids: tuple[str, ...], free: int, passes: int, gap_ns: float) -> float | None:
    """The median start-to-start interval of PE 0x02 passes of `free` moving columns issued
    under `gap_ns` apart (back to back), times the passes of one matmul, in us."""
    profiles = _profile_rows(pids)
    if profiles is None:
        return None
    intervals = []
    for rows in profiles:
        starts = sorted(r["start_ns"] for r in rows if r.get("kind") == "instr" and r.get("engine") == "PE"
                        and r.get("opcode") == "0x02" and r.get("moving_free") == free and r["start_ns"] >= 0)
        intervals += [b - a for a, b in zip(starts, starts[1:]) if b - a < gap_ns]
    return float(np.median(intervals)) * passes / 1000 if intervals else None


def profile_psum_copy_us(pids: tuple[str, ...]) -> float | None:
    """The median completion spacing of DVE 0x46 copies of 128 elements (the weight transposes'
    PSUM->SBUF copies) issued while the previous one was still running, in us."""
    profiles = _profile_rows(pids)
    if profiles is None:
        return None
    spacings = []
    for rows in profiles:
        copies = sorted((r["start_ns"], r["end_ns"]) for r in rows if r.get("kind") == "instr"
                        and r.get("engine") == "DVE" and r.get("opcode") == "0x46" and r.get("free_heuristic") == 128
                        and r.get("in_kernel"))
        spacings += [b[1] - a[1] for a, b in zip(copies, copies[1:]) if b[0] < a[1]]
    return float(np.median(spacings)) / 1000 if spacings else None


def _backlogged_spacings(dtype: str, nbytes: int) -> list[float] | None:
    """The completion spacings, on one DMA engine and ring, of conv-a/b's qSPIO0 descriptors of
    `nbytes` queued before the previous one there completed (ns); None without the data files."""
    profiles = _profile_rows(_conv_ab(dtype))
    if profiles is None:
        return None
    spacings = []
    for rows in profiles:
        rings: dict = {}
        for r in rows:
            if r.get("kind") == "dma" and r.get("queue") == "qSPIO0" and r.get("bytes") == nbytes:
                rings.setdefault((r["dma_engine"], r["ring"]), []).append((r["done_ns"], r["queued_ns"]))
        for descs in rings.values():
            descs.sort()
            spacings += [b[0] - a[0] for a, b in zip(descs, descs[1:]) if b[1] < a[0]]
    return spacings


def profile_weight_element_us(dtype: str) -> float | None:
    """The median backlogged completion spacing of weight descriptors (qSPIO0, 576 elements),
    per element, in us."""
    spacings = _backlogged_spacings(dtype, WEIGHT_ELEMENTS * (2 if dtype == "fp16" else 4))
    return float(np.median(spacings)) / WEIGHT_ELEMENTS / 1000 if spacings else None


def profile_row_us(dtype: str, nbytes: int, rows: int = 8) -> float | None:
    """The median backlogged completion spacing of qSPIO0 descriptors of `nbytes` (`rows`
    partition rows each, the 4 B of a semaphore write included), per row, in us."""
    spacings = _backlogged_spacings(dtype, nbytes)
    return float(np.median(spacings)) / rows / 1000 if spacings else None


def model_row_us(row_bytes: int):
    """A DMA engine's time per partition row of the run's HBM->SBUF DMAs moving `row_bytes` a
    row (their median), in us."""
    def model(run, params) -> float:
        times = []
        for rec in run.trace:
            if rec.opcode == "dma_copy" and rec.reads[0].buffer == "hbm" and rec.writes[0].buffer == "sbuf":
                c = COST_RULES["dma_copy"](rec, params)
                if c.on_chip_rows and c.nbytes == row_bytes * c.on_chip_rows:
                    k = engines_used(c, params)
                    times.append(engine_ns(c, params, k) / (c.on_chip_rows / k))
        return float(np.median(times)) / 1000
    return model


def model_matmul_us(n: int):
    """The cost rule's PE time of the run's matmuls of `n` moving columns (their median), in us."""
    def model(run, params) -> float:
        times = [COST_RULES["nc_matmul"](rec, params).ns for rec in run.trace
                 if rec.opcode == "nc_matmul" and rec.attrs.get("n") == n]
        return float(np.median(times)) / 1000
    return model


def model_psum_copy_us(dtypes: tuple[str, ...]):
    """The Vector engine's time for the run's 128-element copies out of PSUM of `dtypes` (the
    weight transposes'; the conv's own PSUM tiles are N = 14 fp32), their median, in us."""
    def model(run, params) -> float:
        times = [dve_ns(rec, params) for rec in run.trace if rec.opcode == "tensor_copy" and rec.reads
                 and rec.reads[0].buffer == "psum" and rec.reads[0].dtype in dtypes
                 and rec.reads[0].elements_per_partition == 128]
        return float(np.median(times)) / 1000
    return model


def model_weight_element_us(run, params) -> float:
    """A DMA engine's time per run of the run's element-scattered DMAs (the weights), in us."""
    times = []
    for rec in run.trace:
        if rec.opcode == "dma_copy":
            c = COST_RULES["dma_copy"](rec, params)
            if c.run_elements <= 1:
                k = engines_used(c, params)
                times.append(engine_ns(c, params, k) / (c.descriptors / k))
    return float(np.median(times)) / 1000


INSTRUCTION_FACTS = (
    ("M1 PE per N=14 matmul fp32 (conv-a/b)", "C2 tiny N=14 matmuls fp32 32x16",
     lambda: profile_matmul_us(_conv_ab("fp32"), 14, 2, 300), model_matmul_us(14)),
    ("M1 PE per N=14 matmul fp16 (conv-a/b)", "C2 tiny N=14 matmuls fp16 32x16",
     lambda: profile_matmul_us(_conv_ab("fp16"), 14, 1, 300), model_matmul_us(14)),
    ("M2 DMA per weight element fp32 (conv-a/b)", "C2 tiny N=14 matmuls fp32 32x16",
     lambda: profile_weight_element_us("fp32"), model_weight_element_us),
    ("M2 DMA per weight element fp16 (conv-a/b)", "C2 tiny N=14 matmuls fp16 32x16",
     lambda: profile_weight_element_us("fp16"), model_weight_element_us),
    ("M3 PE per N=420 matmul fp32 (conv-c/d)", "C3 HBM gather+DMA transp fp32 32x16",
     lambda: profile_matmul_us(_conv_cd("fp32"), 420, 2, 1000), model_matmul_us(420)),
    ("M3 PE per N=420 matmul fp16 (conv-c/d)", "C3 HBM gather+DMA transp fp16 32x16",
     lambda: profile_matmul_us(_conv_cd("fp16"), 420, 1, 1000), model_matmul_us(420)),
    ("M4 DVE per 16-bit PSUM copy of 128 (conv-a/b)", "C2 tiny N=14 matmuls fp16 32x16",
     lambda: profile_psum_copy_us(_conv_ab("fp16")), model_psum_copy_us(("float16", "bfloat16"))),
    ("M4 DVE per fp32 PSUM copy of 128 (conv-a/b)", "C2 tiny N=14 matmuls fp32 32x16",
     lambda: profile_psum_copy_us(_conv_ab("fp32")), model_psum_copy_us(("float32",))),
    ("M5 DMA per 96 B input row fp16 (conv-a/b)", "C2 tiny N=14 matmuls fp16 32x16",
     lambda: profile_row_us("fp16", 8 * 96 + 4), model_row_us(96)),
    ("M5 DMA per 192 B input row fp32 (conv-a/b)", "C2 tiny N=14 matmuls fp32 32x16",
     lambda: profile_row_us("fp32", 8 * 192 + 4), model_row_us(192)),
    ("M5 DMA per 2 B bias row fp16 (conv-a/b)", "C2 tiny N=14 matmuls fp16 32x16",
     lambda: profile_row_us("fp16", 8 * 2 + 4), model_row_us(2)),
    ("M5 DMA per 4 B bias row fp32 (conv-a/b)", "C2 tiny N=14 matmuls fp32 32x16",
     lambda: profile_row_us("fp32", 8 * 4 + 4), model_row_us(4)),
)


def cross_validate(points) -> list[tuple]:
    """Leave one fact out: for each fact that fixed a constant (FITTED), refit that constant on
    every other latency fact it moves (the grid value with the least squared log error; the
    prior where none moves), then predict the left-out fact with it. A held-out fact fixed
    nothing, so its in-sample error is already its cross-validated one. Each kernel is traced
    once; only the cost model reruns. Returns (label, measured, in-sample us, cross-validated
    us, constant, fitted, refit, facts that moved)."""
    runs = {}
    for label, kernel, inputs, options, measurement, measured in points:
        runs[label] = (nkisim.run_kernel(kernel, inputs, {}, compile_options=options), measurement, measured)

    model_of = {}
    for label, of, measure, model in INSTRUCTION_FACTS:
        measured = measure()
        if measured is not None:
            model_of[label] = model
            runs[label] = (runs[of][0], "instruction", measured)

    def predicted(label, params):
        run, measurement, _ = runs[label]
        if measurement == "instruction":
            return model_of[label](run, params)
        return cost.estimate(run, params, measurement=measurement).total_us

    base = {label: predicted(label, cost.DEFAULT_PARAMS) for label in runs}
    bound = {}
    for label, (run, measurement, _) in runs.items():
        bound[label] = None if measurement == "instruction" else \
            bound_by(build_profile(run.trace, cost.estimate(run, measurement=measurement)))
    rows = []
    for label in runs:
        key = label if label in FITTED else label[:2]
        name = FITTED.get(key)
        if name is None:
            rows.append((label, runs[label][2], base[label], base[label], None, None, None, 0, bound[label]))
            continue
        fitted = getattr(cost.DEFAULT_PARAMS, name)
        prior = PRIORS.get(name, fitted)
        others = [other for other in runs if other != label]
        probes = [_with(cost.DEFAULT_PARAMS, name, fitted * g) for g in (0.5, 2.0)]
        moved = [o for o in others if any(abs(predicted(o, p) - base[o]) > 1e-6 * base[o] for p in probes)]
        best = prior
        if moved:
            def loss(value):
                params = _with(cost.DEFAULT_PARAMS, name, value)
                return sum(np.log(predicted(o, params) / runs[o][2]) ** 2 for o in moved)
            candidates = sorted({fitted * g for g in GRID} | {prior})
            scored = [(loss(v), abs(np.log(v / prior)) if v > 0 and prior > 0 else 0.0, v) for v in candidates]
            best = min(scored)[2]
        refit = _with(cost.DEFAULT_PARAMS, name, best)
        rows.append((label, runs[label][2], base[label], predicted(label, refit), name, fitted,
                     getattr(refit, name), len(moved), bound[label]))
    return rows


def error_bands(rows) -> dict:
    """The model's error band for each class of kernel (what bounds it, nkisim.cost.profile.bound_by):
    the largest cross-validated |error| of the facts of that class; a class no fact has takes
    the largest of all (what the grader shows beside a p99, grader/fidelity_bands.json)."""
    errors: dict[str, list] = {}
    for label, measured, _, crossed, *_, bound in rows:
        if bound is not None:       # an instruction fact: not a kernel's latency
            errors.setdefault(bound, []).append((abs(crossed / measured - 1), label))
    worst_all = max(e for group in errors.values() for e, _ in group)
    return {b: {"band": round(max((e for e, _ in errors.get(b, [])), default=worst_all), 4),
                "facts": sorted(label for _, label in errors.get(b, []))} for b in BOUNDS}


def report_cross_validation(points, bands_path: str | None = None) -> None:
    rows = cross_validate(points)
    print("\n=== cross-validated: each fact that fixed a constant, predicted with that constant refitted "
          "on the other facts ===")
    print(f"  {'fact':40} {'measured':>9} {'in-sample':>10} {'cross-val':>10}   constant: fitted -> refit "
          "(other facts it moves)")
    worst = 0.0
    outside = []
    for label, measured, inside, crossed, name, fitted, refit, moved, _ in rows:
        e_in, e_cv = inside / measured - 1, crossed / measured - 1
        worst = max(worst, abs(e_cv))
        if abs(e_cv) > 0.15:
            outside.append(label)
        what = f"{name}: {fitted:g} -> {refit:g} ({moved})" if name else "held out (fixed nothing)"
        print(f"  {label:40} {measured:9.4g} {e_in:+10.1%} {e_cv:+10.1%}   {what}")
    print(f"cross-validated: {len(rows)} facts; outside 15%: {', '.join(outside) or 'none'}; worst {worst:.1%}")
    bands = error_bands(rows)
    print("error band by what bounds the kernel (largest cross-validated |error| of its facts):")
    for b, entry in bands.items():
        print(f"  {b:8} +/-{entry['band']:.1%}  ({', '.join(entry['facts']) or 'no fact of its own: the largest of all'})")
    if bands_path:
        with open(bands_path, "w") as fh:
            json.dump({"source": "bench/fidelity.py --cross-validate", "bands": bands}, fh, indent=1)
            fh.write("\n")
        print(f"bands written to {bands_path}")


# ----- Trainium1 (--platform trn1): the facts of the 12 Trn1 profiles ----------------------------

@dataclasses.dataclass(frozen=True)
class Trn1Fact:
    """One fact of the Trn1 profiles and how the model predicts it from the timelines of the
    two calibration kernels ({"fd1k": Timeline, "fd2k": Timeline}). `constant`: the trn1
    parameter it fixes (nkisim/cost/generations.py), None if held out. Facts of one `group`
    restate one measurement (a kernel's total_time is its span plus the overhead), so
    cross-validation leaves them out together."""
    label: str
    measured: float
    unit: str
    n: int
    constant: str | None
    group: str
    predict: object


def _dve_ns(tl) -> float:
    return float(np.median([s.end - s.start for s in tl.slots if s.queue == "DVE"]))


def _backlogged_rate(tl) -> float:
    """B/ns a DMA engine moves in a chain of loads: the bytes each engine moves for a load that
    had to wait for the previous one's engines, over how far apart their transfers start."""
    p = tl.params
    loads = sorted(tl.loads, key=lambda s: s.start)
    rates = [tl.load_bytes[id(b)] / b.engines / (b.start - a.start) for a, b in zip(loads, loads[1:])
             if b.start > b.issue_end + p.dma_start_latency_ns + 1e-6]
    if not rates:
        raise RuntimeError("no load waited for the previous one's DMA engines: the backlogged rate is undefined")
    return float(np.median(rates))


def trn1_measured() -> dict:
    """The Trn1 profiles' figures the facts compare with: medians over the profiles of each
    kernel (bench/profiles.py reads the rows; --platform trn1 there prints them in detail)."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench import profiles
    data = profiles.DATA_DIRS["trn1"]
    found = {k: collections.defaultdict(list) for k in ("fd1k", "fd2k")}
    for pid in profiles.profile_ids(True, False, data):
        kernel = "fd1k" if "fd1k" in pid else "fd2k"
        hw, _ = profiles.load_hardware(pid, data)
        got = found[kernel]
        got["span"].append(hw.span_us)
        got["total"].append(hw.total_us)
        got["dve"] += [i.end - i.start for i in hw.by("DVE", "0x41")]
        dmas, _ = profiles.hw_dmas(hw)
        for (queue, nb), times in profiles.backlogged_ring_times(dmas).items():
            if queue == "qSPIO0":
                got["rate"].append(nb / float(np.median(times)))
    return found


def trn1_facts(found: dict) -> list[Trn1Fact]:
    one, two = found["fd1k"], found["fd2k"]
    els = [1000] * len(one["dve"]) + [2000] * len(two["dve"])
    slope = float(np.polyfit(els, one["dve"] + two["dve"], 1)[0])    # least squares, as README fact 2
    m = {k: {q: float(np.median(v)) for q, v in d.items()} for k, d in found.items()}
    n = {k: {q: len(v) for q, v in d.items()} for k, d in found.items()}
    return [
        # the start latencies are the profiles' own (measured, generations.py): the spans are held out
        Trn1Fact("V1 fd1k kernel span", m["fd1k"]["span"], "us", n["fd1k"]["span"], None,
                 "fd1k timeline", lambda t: t["fd1k"].makespan_ns / 1e3),
        Trn1Fact("V2 fd2k kernel span", m["fd2k"]["span"], "us", n["fd2k"]["span"], None,
                 "fd2k timeline", lambda t: t["fd2k"].makespan_ns / 1e3),
        Trn1Fact("V3 fd1k total_time", m["fd1k"]["total"], "us", n["fd1k"]["total"], "profile_overhead_ns",
                 "fd1k timeline", lambda t: t["fd1k"].total_us),
        Trn1Fact("V4 fd2k total_time", m["fd2k"]["total"], "us", n["fd2k"]["total"], "profile_overhead_ns",
                 "fd2k timeline", lambda t: t["fd2k"].total_us),
        Trn1Fact("V5 DVE tensor_tensor per fp32 element", slope, "ns/el.", len(els), "dve_cycles_per_element",
                 "DVE", lambda t: (_dve_ns(t["fd2k"]) - _dve_ns(t["fd1k"])) / 1000),
        Trn1Fact("V6 DVE tensor_tensor 1000 fp32 el.", m["fd1k"]["dve"], "ns", n["fd1k"]["dve"],
                 "dve_overhead_cycles", "DVE", lambda t: _dve_ns(t["fd1k"])),
        Trn1Fact("V7 DMA engine rate, fd1k loads", m["fd1k"]["rate"], "B/ns", n["fd1k"]["rate"],
                 "dma_engine_bytes_per_ns", "fd1k rings", lambda t: _backlogged_rate(t["fd1k"])),
        Trn1Fact("V8 DMA engine rate, fd2k loads", m["fd2k"]["rate"], "B/ns", n["fd2k"]["rate"],
                 "dma_engine_bytes_per_ns", "fd2k rings", lambda t: _backlogged_rate(t["fd2k"])),
    ]


# the value a trn1 constant takes where no other fact moves it: the documented figure
# (generations.py names it), else its value in the model itself
TRN1_PRIORS = {"dma_engine_bytes_per_ns": 17.0, "dma_start_latency_ns": 1000.0}
# the refit's candidates for trn1: multiples of the model's value in ~1% steps (its facts are
# few and cheap to predict, so the refit is a search, not a choice among GRID's seven)
TRN1_GRID = tuple(np.geomspace(0.25, 4.0, 281))


def trn1_runs() -> dict:
    from nkisim.settings import SimSettings
    v = np.random.default_rng(1).random(256000, dtype=np.float32)
    return {name: nkisim.run_kernel(vector_add.make_vector_add_stream(fd), (v, v.copy()), {},
                                    settings=SimSettings(platform="trn1"))
            for name, fd in (("fd1k", 1000), ("fd2k", 2000))}


def trn1_timelines(runs: dict, params) -> dict:
    found = {}
    for name, run in runs.items():
        tl = cost.estimate(run, params, measurement="profile")
        # the loads (HBM -> SBUF) that moved bytes, and their bytes: what V7 and V8 time
        loads = [(r, s) for r, s in zip(run.trace, tl.slots) if s.queue == "DMA" and s.engines
                 and r.reads[0].buffer in ("hbm", "shared_hbm") and r.writes[0].buffer == "sbuf"]
        tl.loads = [s for _, s in loads]
        tl.load_bytes = {id(s): r.writes[0].nbytes for r, s in loads}
        found[name] = tl
    return found


def trn1_refit(facts: list, runs: dict, base, name: str, using: list) -> tuple[object, list]:
    """The value of `name` that best fits the facts in `using` that it moves (least squared log
    error over TRN1_GRID x the model's value and the prior; ties: nearest the prior), and
    those facts. None moved: the prior."""
    fitted = getattr(base, name)
    prior = TRN1_PRIORS.get(name, fitted)

    def predictions(params):
        tls = trn1_timelines(runs, params)
        return {f.label: f.predict(tls) for f in using}
    now = predictions(base)
    probes = [predictions(_with(base, name, fitted * g)) for g in (0.5, 2.0)]
    moved = [f for f in using if any(abs(p[f.label] - now[f.label]) > 1e-6 * abs(now[f.label]) for p in probes)]
    if not moved:
        return prior, moved
    scored = []
    for v in sorted({fitted * g for g in TRN1_GRID} | {prior}):
        got = predictions(_with(base, name, v))
        loss = sum(np.log(got[f.label] / f.measured) ** 2 for f in moved)
        scored.append((loss, abs(np.log(v / prior)) if v > 0 and prior > 0 else 0.0, v))
    return getattr(_with(base, name, min(scored)[2]), name), moved


def report_trn1(cross: bool, save: str | None) -> None:
    """The Trn1 facts (bench/profiles.py --platform trn1 has the instruction-level detail)."""
    params = cost.params_for("trn1")
    gen = cost.generation("trn1")
    facts = trn1_facts(trn1_measured())
    runs = trn1_runs()
    tls = trn1_timelines(runs, params)
    print(f"{gen.core} (trn1) model, cost.params_for('trn1'), against the 12 Trainium1 profiles of the part-1 vector "
          f"add (shared/data/trn1-profiles: medians over each kernel's profiles); calibration kernels "
          f"vector_add_stream(1000) and (2000) under SimSettings(platform='trn1'), {tls['fd1k'].dma_mode} DMAs")
    print(f"{'fact':40} {'unit':>6} {'n':>3} {'measured':>9} {'predicted':>10} {'error':>7}  role")
    errors = {}
    for f in facts:
        predicted = f.predict(tls)
        errors[f.label] = predicted / f.measured - 1
        role_ = f"fit ({f.constant})" if f.constant else "held out"
        flag = "" if abs(errors[f.label]) <= 0.15 else "  <-- outside 15%"
        print(f"{f.label:40} {f.unit:>6} {f.n:3d} {f.measured:9.4g} {predicted:10.4g} {errors[f.label]:+7.1%}  "
              f"{role_}{flag}")
    inside = sum(abs(e) <= 0.15 for e in errors.values())
    print(f"trn1 facts within 15%: {inside} of {len(facts)}; worst {max(abs(e) for e in errors.values()):.1%}")
    d2k = _dve_ns(tls["fd2k"])
    print(f"  detail (implied by V5 and V6, not a fact of its own): DVE tensor_tensor 2000 fp32 el. predicted "
          f"{d2k:.1f} ns, measured median 3820.5 (README fact 2)")
    for name in ("fd1k", "fd2k"):
        tl, run = tls[name], runs[name]
        adds = [s for r, s in zip(run.trace, tl.slots) if r.opcode == "tensor_tensor"]
        print(f"  detail (not a fact of the fit): {name} loads end / last DVE start at {adds[-1].start / 1e3:.2f} us, "
              f"stores {(tl.makespan_ns - adds[-1].end) / 1e3:.2f} us after its end (bench/profiles.py --platform "
              f"trn1 compares them: loads and stores start at their own measured latencies)")
    print("constants the facts fix: the model's value, and the best value on its facts (the in-sample fit):")
    for name in dict.fromkeys(f.constant for f in facts if f.constant):
        best, moved = trn1_refit(facts, runs, params, name, [f for f in facts if f.constant == name])
        print(f"  {name:26} model {getattr(params, name):g}, best on {', '.join(f.label[:2] for f in moved)}: {best:g}")
    if cross:
        print("\n=== trn1 cross-validated: each fact that fixed a constant, predicted with that constant refitted on the "
              "other facts (leaving out those of its group: a kernel's span and total_time restate one timeline; "
              "V5 and V6 share the DVE durations) ===")
        print(f"  {'fact':40} {'measured':>9} {'in-sample':>10} {'cross-val':>10}   constant: model -> refit "
              "(facts it was refitted on)")
        outside, worst = [], 0.0
        for f in facts:
            if f.constant is None:
                e_cv = errors[f.label]
                what = "held out (fixed nothing)"
            else:
                others = [o for o in facts if o.group != f.group]
                refit, moved = trn1_refit(facts, runs, params, f.constant, others)
                e_cv = f.predict(trn1_timelines(runs, _with(params, f.constant, refit))) / f.measured - 1
                what = (f"{f.constant}: {getattr(params, f.constant):g} -> {refit:g} "
                        f"({', '.join(o.label[:2] for o in moved) or 'none: the prior'})")
            worst = max(worst, abs(e_cv))
            if abs(e_cv) > 0.15:
                outside.append(f.label)
            print(f"  {f.label:40} {f.measured:9.4g} {errors[f.label]:+10.1%} {e_cv:+10.1%}   {what}")
        print(f"trn1 cross-validated: {len(facts)} facts; within 15%: {len(facts) - len(outside)} of {len(facts)}; "
              f"outside 15%: {', '.join(outside) or 'none'}; worst {worst:.1%}")
    print(f"not checked by the trn1 facts (no such instruction or dtype in the profiles): the Tensor Engine, the "
          f"Scalar engine, GpSimd compute, fp16/bf16, PSUM, the NC-v2 shared ports; docs/cost-model.md "
          f"'Trainium1 (NeuronCore-v2)'")
    if save:
        with open(save, "w") as fh:
            json.dump(errors, fh, indent=1)
        print(f"errors written to {save}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-conv", action="store_true")
    parser.add_argument("--alternatives", action="store_true",
                        help="also show the DMA-issue and small-descriptor facts under the alternative "
                        "models the facts rule out")
    parser.add_argument("--cross-validate", action="store_true",
                        help="also predict each fitted fact with its constant refitted without it (minutes)")
    parser.add_argument("--bands", metavar="JSON", help="with --cross-validate: write the error band of each "
                        "class of kernel here (the grader's is grader/fidelity_bands.json)")
    parser.add_argument("--save", metavar="JSON", help="write every fact's error here (a baseline for --baseline)")
    parser.add_argument("--baseline", metavar="JSON", help="a --save file of an earlier model: show how far "
                        "each fact moved and flag those more than 3 points worse")
    parser.add_argument("--platform", choices=("trn1", "trn2"), default="trn2",
                        help="whose facts: trn2 (default: the Trn2 measurements above) or trn1 (the 12 Trainium1 "
                        "profiles, with --cross-validate and --save)")
    args = parser.parse_args()
    if args.platform == "trn1":
        trn2_only = [flag for flag, given in (("--skip-conv", args.skip_conv), ("--alternatives", args.alternatives),
                                              ("--bands", args.bands), ("--baseline", args.baseline)) if given]
        if trn2_only:
            parser.error(f"{', '.join(trn2_only)}: only for the trn2 facts (drop it, or leave out --platform trn1)")
        report_trn1(args.cross_validate, args.save)
        return
    baseline = None
    if args.baseline:
        with open(args.baseline) as fh:
            baseline = json.load(fh)
    facts: list[Fact] = []
    ok = report_calibration(facts)
    print("calibration:", "all points within 15% and ordered as measured" if ok else "OUT OF TARGET")
    missed = report_bounds(facts)
    print("bounds:", "all hold" if not missed else f"not held: {'; '.join(missed)}")
    report_small_fp16(facts)
    if not args.skip_conv:
        report_conv(facts)
    worse = report_mechanisms(facts, baseline)
    if args.alternatives:
        report_alternatives()
        report_small_dma_alternatives()
    if args.cross_validate:
        report_cross_validation(calibration_points(), args.bands)
    outside = [f.label for f in facts if abs(f.error) > 0.15]
    print(f"\n{len(facts)} facts; outside 15%: {', '.join(outside) or 'none'}")
    if baseline is not None:
        print("more than 3 points worse than the baseline:",
              ", ".join(f"{f.label} ({baseline[f.label]:+.1%} -> {f.error:+.1%})" for f in worse) or "none")
    if args.save:
        with open(args.save, "w") as fh:
            json.dump({f.label: f.error for f in facts}, fh, indent=1)
        print(f"errors written to {args.save}")


if __name__ == "__main__":
    main()

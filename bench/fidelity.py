"""Cost-model fidelity: predicted vs measured Trn2 latency for every calibration point.

Points are the hardware measurements of trn2-cost-model.md section 4 ("bench" = nki.benchmark
NCL p99 in the default DGE mode; "profile" = neuron-profile total_time with --disable-dge),
reproduced with our own kernels. Prints each point's error (target within 15%) and checks
that every pair of points is ordered as measured. Then places the reference conv2d kernels
against the course thresholds.

    python bench/fidelity.py [--skip-conv]
"""
from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

import nkisim

nkisim.install()

from nkisim import cost  # noqa: E402
from reference_kernels import calibration, conv2d_optimized, conv2d_relaxed, vector_add  # noqa: E402

STATIC = {"additional_compile_opt": "--disable-dge"}


def calibration_points():
    """(label, kernel, inputs, compile options, measurement kind, measured us)."""
    v25k = np.random.default_rng(0).random(25600, dtype=np.float32)
    v256k = np.random.default_rng(1).random(256000, dtype=np.float32)
    m1k = np.random.default_rng(2).random((1024, 1024), dtype=np.float32)
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
    ]


def predict(kernel, inputs, options, measurement):
    run = nkisim.run_kernel(kernel, inputs, {}, compile_options=options)
    start = time.perf_counter()
    timeline = cost.estimate(run, measurement=measurement)
    return timeline, time.perf_counter() - start


# points that fixed a constant in nkisim/cost/params.py; the others are held out of the fit
FITTED = {"B1": "dge_issue_ns", "B2": "dge_issue_per_row_ns", "P1": "dve_fp32_rate", "P3": "dma_descriptor_ns"}


def report_calibration() -> bool:
    print(f"{'point':36} {'measured us':>11} {'predicted us':>12} {'error':>7}  role")
    rows = []
    for label, kernel, inputs, options, kind, measured in calibration_points():
        timeline, _ = predict(kernel, inputs, options, kind)
        predicted = timeline.total_us
        error = predicted / measured - 1
        rows.append((label, measured, predicted))
        flag = "" if abs(error) <= 0.15 else "  <-- outside 15%"
        role = f"fit ({FITTED[label[:2]]})" if label[:2] in FITTED else "held out"
        print(f"{label:36} {measured:11.1f} {predicted:12.1f} {error:+7.1%}  {role}{flag}")
        if label.startswith("P3"):
            busy = timeline.busy_ns
            print(f"{'':36} profile detail: DMA engines active {busy['DMA'] / 1e3:.1f} us (measured ~28), "
                  f"PE active {busy['PE'] / 1e3:.1f} us (measured ~16.2), {timeline.dma_count} DMAs "
                  f"(measured 129), {timeline.dma_bytes / 1e6:.2f} MB (measured 8.45)")
    worst = max(abs(p / m - 1) for _, m, p in rows)
    misordered = [(a[0], b[0]) for a, b in itertools.combinations(rows, 2)
                  if (a[1] - b[1]) * (a[2] - b[2]) < 0]
    print(f"worst error {worst:.1%} (target <= 15%); pairs ordered differently from hardware: "
          f"{len(misordered)} of {len(rows) * (len(rows) - 1) // 2}")
    for a, b in misordered:
        print(f"  misordered: {a} vs {b}")
    return worst <= 0.15 and not misordered


THRESHOLDS = {("float32", 224): (4596, 4964), ("float16", 224): (1002, 1365),
              ("float32", 32): (110, 110), ("float16", 32): (84, 84)}


# The course's own reference kernels ran on Trn2 at about threshold / 1.2 (trn2-cost-model.md
# section 1). Their code is not ours, so these compare kernels of the same kind, not the same
# kernel; T1 fixed pe_fp32_pass_cycles, the rest are held out.
COURSE_REFERENCES = [("T1 optimized float32 224x224", "optimized", "float32", 4596 / 1.2, "fit (pe_fp32_pass_cycles)"),
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


def report_conv() -> None:
    est = conv_estimates()
    print("\nour reference conv2d kernels vs the course's (threshold / 1.2), pool 1, batch 1")
    print(f"{'point':36} {'course us':>11} {'ours us':>12} {'error':>7}  role")
    for label, kernel, dtype, course_us, role in COURSE_REFERENCES:
        ours = est[(kernel, dtype, 224, 1)]
        print(f"{label:36} {course_us:11.1f} {ours:12.1f} {ours / course_us - 1:+7.1%}  {role}")

    print("\nreference conv2d kernels vs the course thresholds (batch 1, C_in = C_out = 256, K = 3)")
    print(f"{'config':24} {'optimized us':>12} {'relaxed us':>11} {'opt thr':>8} {'rel thr':>8}")
    for dtype, size, pool in itertools.product(("float32", "float16"), (224, 32), (1, 2)):
        h, w = (224, 224) if size == 224 else (32, 16)
        opt, rel = THRESHOLDS[(dtype, size)]

        def tier(t):
            return "full" if t <= opt else ("95%" if t <= rel else "0")
        o, r = est[("optimized", dtype, size, pool)], est[("relaxed", dtype, size, pool)]
        print(f"{dtype} {h}x{w} pool{pool:<6} {o:9.1f} {tier(o):>4} {r:7.1f} {tier(r):>4} {opt:8d} {rel:8d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-conv", action="store_true")
    args = parser.parse_args()
    ok = report_calibration()
    print("calibration:", "all points within 15% and ordered as measured" if ok else "OUT OF TARGET")
    if not args.skip_conv:
        report_conv()


if __name__ == "__main__":
    main()

"""`nkisim` command line.

    nkisim demo     run the reference kernels through the simulator and check them against NumPy
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _cases():
    """(label, kernel, inputs, kwargs, reference) for the course's reference kernels."""
    from reference_kernels import conv2d_optimized, conv2d_relaxed, transpose, vector_add
    from reference_kernels.numpy_reference import conv2d_maxpool_reference, transpose_reference, vector_add_reference

    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.random(shape, dtype=np.float32)

    a, b = f32(25600), f32(25600)
    yield "vector_add_naive n=128", vector_add.vector_add_naive, (a[:128], b[:128]), {}, vector_add_reference
    yield "vector_add_tiled n=25600", vector_add.vector_add_tiled, (a, b), {}, vector_add_reference
    yield "vector_add_stream n=25600", vector_add.vector_add_stream, (a, b), {}, vector_add_reference
    m = f32(512, 384)
    yield "matrix_transpose 512x384", transpose.matrix_transpose, (m,), {}, transpose_reference
    for pool in (1, 2):
        x, w, bias = f32(1, 128, 34, 18), f32(128, 128, 3, 3), f32(128)
        for name, module in (("relaxed", conv2d_relaxed), ("optimized", conv2d_optimized)):
            yield (f"conv2d {name} 32x16 pool={pool}", module.fused_conv2d_maxpool, (x, w, bias),
                   {"pool_size": pool}, conv2d_maxpool_reference)


def demo(_args) -> int:
    import nkisim
    nkisim.install()
    failures = 0
    print(f"{'kernel':36} {'result':8} {'instructions':>12} {'wall s':>8}")
    for label, kernel, inputs, kwargs, reference in _cases():
        start = time.perf_counter()
        run = nkisim.run_kernel(kernel, inputs, kwargs)
        wall = time.perf_counter() - start
        ok = np.allclose(run.outputs, reference(*inputs, **kwargs))
        failures += not ok
        print(f"{label:36} {'ok' if ok else 'WRONG':8} {len(run.trace):12d} {wall:8.2f}")
    print("all reference kernels match NumPy" if not failures else f"{failures} kernel(s) disagree with NumPy")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nkisim", description="NKI simulator on NumPy")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the reference kernels and check them against NumPy").set_defaults(func=demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

"""The `nkisim` command: the simulator's own CLI (nkisim/cli.py) with these reference kernels as
its demo. Composed here because nkisim imports no kernels: it is the layer they run on."""
from __future__ import annotations

import sys

import numpy as np


def cases():
    """(label, kernel, inputs, kwargs, reference) for the course's reference kernels."""
    from . import conv2d_optimized, conv2d_relaxed, transpose, vector_add
    from .numpy_reference import conv2d_maxpool_reference, transpose_reference, vector_add_reference

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


def main(argv: list[str] | None = None) -> int:
    from nkisim.cli import main as nkisim_main
    return nkisim_main(argv, demo_cases=cases)


if __name__ == "__main__":
    sys.exit(main())

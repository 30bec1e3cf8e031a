"""Part 1 kernels with the usual debugging leftovers: unused sys/os imports, print and
nl.device_print, f-strings, and a local test harness under the `__main__` guard that uses
numpy, time and argparse freely (grading never runs it)."""
import os
import sys
import time

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

DEBUG = False


@nki.compiler.skip_middle_end_transformations
@nki.jit
def vector_add_stream(a_vec, b_vec):
    M = a_vec.shape[0]
    FREE_DIM = 2000
    PARTITION_DIM = 128
    TILE_M = PARTITION_DIM * FREE_DIM
    assert M % TILE_M == 0, f"M={M} must be a multiple of {TILE_M}"
    out = nl.ndarray(shape=a_vec.shape, dtype=a_vec.dtype, buffer=nl.hbm)
    a_re = a_vec.reshape((M // TILE_M, PARTITION_DIM, FREE_DIM))
    b_re = b_vec.reshape((M // TILE_M, PARTITION_DIM, FREE_DIM))
    out_re = out.reshape((M // TILE_M, PARTITION_DIM, FREE_DIM))
    if DEBUG:
        print(f"streaming {M // TILE_M} tiles of {PARTITION_DIM}x{FREE_DIM}")
    for m in nl.affine_range(M // TILE_M):
        a_tile = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((PARTITION_DIM, FREE_DIM), dtype=b_vec.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_re[m])
        nisa.dma_copy(dst=b_tile, src=b_re[m])
        res = nisa.tensor_tensor(a_tile, b_tile, op=nl.add)
        if DEBUG:
            nl.device_print("res", res)
        nisa.dma_copy(dst=out_re[m], src=res)
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.hbm)
    P = nl.tile_size.pmax
    for i in nl.affine_range(M // P):
        for j in nl.affine_range(N // P):
            t = nl.ndarray((P, P), dtype=a_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a_tensor[i * P:(i + 1) * P, j * P:(j + 1) * P])
            t_t = nisa.nc_transpose(t)
            t_sb = nisa.tensor_copy(t_t)
            nisa.dma_copy(dst=out[j * P:(j + 1) * P, i * P:(i + 1) * P], src=t_sb)
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=256000)
    args = parser.parse_args()
    a = np.random.rand(args.size).astype(np.float32)
    b = np.random.rand(args.size).astype(np.float32)
    start = time.perf_counter()
    out = nki.baremetal(vector_add_stream)(a, b)
    print(f"took {time.perf_counter() - start:.3f} s; ok={np.allclose(out, a + b)}", file=sys.stderr)
    np.save(os.path.join("/tmp", "out.npy"), out)

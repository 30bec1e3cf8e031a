"""A part-1 file with a `main()` driver that only the `__main__` block calls: it times the
kernels, saves outputs with np.save and shells out to neuron-profile. Grading imports the file
and calls the kernels, never main, so what main does is only reported as warnings."""
import argparse
import os
import time

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.compiler.skip_middle_end_transformations
@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.hbm)
    for i in nl.affine_range(M // P):
        for j in nl.affine_range(N // P):
            tile = nl.ndarray((P, P), dtype=a_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=a_tensor[i * P:(i + 1) * P, j * P:(j + 1) * P])
            nisa.dma_copy(dst=out[j * P:(j + 1) * P, i * P:(i + 1) * P], src=nisa.tensor_copy(nisa.nc_transpose(tile)))
    return out


def save_result(name, array, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, f"{name}.npy"), array)


def profile(neff):
    import subprocess
    subprocess.run(["neuron-profile", "capture", "-n", neff], check=False)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    a = np.random.rand(args.size, args.size).astype(np.float32)
    start = time.perf_counter()
    out = nki.baremetal(matrix_transpose)(a)
    print(f"{time.perf_counter() - start:.3f} s, correct: {np.array_equal(out, a.T)}")
    save_result("transpose", out, "results")
    if args.profile:
        bench = nki.benchmark(warmup=2, iters=10, save_neff_name="transpose.neff")(matrix_transpose)
        bench(a)
        profile("transpose.neff")


if __name__ == "__main__":
    main()

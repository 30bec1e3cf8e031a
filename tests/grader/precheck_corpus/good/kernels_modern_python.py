"""Modern Python in a kernel file: walrus, match, lambdas, closures with nonlocal,
try/finally, `with np.errstate`, keyword-only helpers, star-unpacking and a generator."""
from typing import Iterator, Sequence

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa

ceil_div = lambda a, b: -(-a // b)


def tiles(n: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(size, n - start)


def make_counter():
    count = 0

    def bump(by=1):
        nonlocal count
        count += by
        return count
    return bump


def choose_op(kind: str):
    match kind:
        case "add":
            return nl.add
        case "max" | "maximum":
            return nl.maximum
        case _:
            raise ValueError(f"unsupported op {kind}")


@nki.jit
def vector_combine(a_vec, b_vec, *, kind: str = "add", chunk: int = 512):
    (M,) = a_vec.shape
    P = nl.tile_size.pmax
    if (rem := M % P) != 0:
        raise ValueError(f"length {M} leaves {rem} elements over 128 partitions")
    op = choose_op(kind)
    bump = make_counter()
    out = nl.ndarray((M,), dtype=a_vec.dtype, buffer=nl.hbm)
    a2, b2, o2 = (t.reshape((P, M // P)) for t in (a_vec, b_vec, out))
    for start, size in tiles(M // P, chunk):
        a_t = nl.ndarray((P, size), dtype=a_vec.dtype, buffer=nl.sbuf)
        b_t = nl.ndarray((P, size), dtype=b_vec.dtype, buffer=nl.sbuf)
        try:
            nisa.dma_copy(dst=a_t, src=a2[:, start:start + size])
            nisa.dma_copy(dst=b_t, src=b2[:, start:start + size])
            nisa.dma_copy(dst=o2[:, start:start + size], src=nisa.tensor_tensor(a_t, b_t, op=op))
        finally:
            bump()
    return out


def summarize(values: Sequence[float]) -> str:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.asarray(values, dtype=np.float64) / np.max(values)
    first, *rest = ratio.tolist()
    return f"{first:.3f} then {len(rest)} more (chunks={ceil_div(len(values), 4)})"

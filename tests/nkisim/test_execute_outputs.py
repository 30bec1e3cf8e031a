"""Outputs of an execution: an output that is a whole allocation is handed over without a copy,
yet no two outputs ever share memory, and each holds the values the kernel wrote."""
from __future__ import annotations

import numpy as np

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


@nki.jit
def doubled_twice(a):
    """The same HBM tensor returned twice, and a second one sliced."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    wide = nl.ndarray((a.shape[0], 2 * a.shape[1]), dtype=a.dtype, buffer=nl.hbm)
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    y = nisa.tensor_tensor(x, x, op=nl.add)
    nisa.dma_copy(dst=out, src=y)
    nisa.dma_copy(dst=wide[:, 0:a.shape[1]], src=y)
    nisa.dma_copy(dst=wide[:, a.shape[1]:2 * a.shape[1]], src=x)
    return out, out, wide[:, 0:a.shape[1]]


def test_outputs_hold_the_values_and_share_no_memory():
    a = np.random.default_rng(2).random((128, 64), dtype=np.float32)
    first, second, part = nkisim.run_kernel(doubled_twice, (a,), {}).outputs
    for out in (first, second, part):
        assert type(out) is np.ndarray and np.array_equal(out, a + a)
    assert not np.shares_memory(first, second) and not np.shares_memory(first, part)
    assert not np.shares_memory(first, a)
    first[...] = 0
    assert np.array_equal(second, a + a)

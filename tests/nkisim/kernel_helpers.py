"""Loads and stores inside the tests' own kernels, in both dialects: NKI 0.6 (`load`, `store`,
`sbuf`) and legacy (`lload`, `lstore`). Each is plain NKI, called from a kernel being traced."""
import nkisim

nkisim.install()

import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


def load(src, dtype=None, buffer=None):
    """src (HBM) into a new tile of `buffer` (SBUF by default), cast to `dtype` if given."""
    tile = nl.ndarray(src.shape, dtype or src.dtype, buffer=buffer or nl.sbuf)
    nisa.dma_copy(dst=tile, src=src)
    return tile


def store(tile):
    """tile into a new shared-HBM output."""
    out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def sbuf(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.sbuf)


def lload(src):
    tile = lnl.ndarray(src.shape, src.dtype, buffer=lnl.sbuf)
    lisa.dma_copy(dst=tile, src=src)
    return tile


def lstore(tile):
    out = lnl.ndarray(tile.shape, tile.dtype, buffer=lnl.hbm)
    lisa.dma_copy(dst=out, src=tile)
    return out

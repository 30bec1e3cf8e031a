"""A known-wrong RMSNorm in NKI 0.6 (grader/problems/rmsnorm/): the reference kernel summing x instead of
x^2 (op=nl.copy where nl.square belongs), so it divides by sqrt(mean(x) + eps): NaN wherever a
row's mean is negative, and wrong values elsewhere."""

import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def rmsnorm(x, gamma, eps=1e-6):
    """Return RMSNorm(x) * gamma over x's last axis; x [rows, D] with rows a multiple of 128."""
    rows, D = x.shape
    P = nl.tile_size.pmax
    assert rows % P == 0, "rows must be a multiple of 128"
    assert gamma.shape == (D,), "gamma must have one value per column of x"
    out = nl.ndarray((rows, D), dtype=x.dtype, buffer=nl.shared_hbm)

    # gamma on every partition (the same row read 128 times), and eps as the rsqrt's bias column
    g_all = nl.ndarray((P, D), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_all, src=gamma.ap(pattern=[[0, P], [1, D]], offset=0))
    eps_col = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eps_col, value=eps)

    for t in nl.affine_range(rows // P):
        x_t = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_t, src=x[t * P:(t + 1) * P, :])

        squares = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=squares, op=nl.copy, data=x_t,   # WRONG: x, not x^2
                               reduce_op=nl.add, reduce_res=sum_sq)
        inv_rms = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_rms, op=nl.rsqrt, data=sum_sq, scale=1.0 / D, bias=eps_col)

        y = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=y, data=x_t, op0=nl.multiply, operand0=inv_rms, op1=nl.multiply,
                                  operand1=g_all)
        nisa.dma_copy(dst=out[t * P:(t + 1) * P, :], src=y)

    return out

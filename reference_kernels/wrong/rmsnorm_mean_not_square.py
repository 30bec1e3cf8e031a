"""A known-wrong RMSNorm (grader/problems/rmsnorm/): the reference kernel summing x instead of
x^2 (op=nl.copy where nl.square belongs), so it divides by sqrt(mean(x) + eps): NaN wherever a
row's mean is negative, and wrong values elsewhere."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.compiler.skip_middle_end_transformations
@nki.jit
def rmsnorm(x, gamma, eps=1e-6):
    """Return RMSNorm(x) * gamma over x's last axis; x [rows, D] with rows a multiple of 128."""
    rows, D = x.shape
    P = nl.tile_size.pmax
    assert rows % P == 0, "rows must be a multiple of 128"
    assert gamma.shape == (D,), "gamma must have one value per column of x"
    out = nl.ndarray((rows, D), dtype=x.dtype, buffer=nl.shared_hbm)

    # gamma on every partition, and eps as a column for the rsqrt's bias
    g_row = nl.ndarray((1, D), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_row, src=gamma.reshape((1, D)))
    g_all = nl.broadcast_to(g_row, shape=(P, D))
    eps_col = nisa.memset((P, 1), eps, nl.float32)

    for t in nl.affine_range(rows // P):
        x_t = nl.ndarray((P, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_t, src=x[t * P:(t + 1) * P, :])

        sum_sq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(op=nl.copy, data=x_t,   # WRONG: x, not x^2
                               reduce_op=nl.add, reduce_res=sum_sq, dtype=nl.float32)
        inv_rms = nisa.activation(op=nl.rsqrt, data=sum_sq, scale=1.0 / D, bias=eps_col)

        y = nisa.scalar_tensor_tensor(data=x_t, op0=nl.multiply, operand0=inv_rms, op1=nl.multiply,
                                      operand1=g_all, dtype=x.dtype)
        nisa.dma_copy(dst=out[t * P:(t + 1) * P, :], src=y)

    return out

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def softmax(x):
    rows, d = x.shape
    P = nl.tile_size.pmax
    y = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(rows // P):
        xt = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[t * P:(t + 1) * P, :])
        # -max per row (Vector Engine), then exp(x - max) with the row sums in one Scalar
        # Engine instruction, then one multiply by 1/sum.
        neg_max = nisa.tensor_reduce(nl.max, xt, axis=(1,), negate=True, keepdims=True,
                                     dtype=nl.float32)
        sums = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        e = nisa.activation_reduce(op=nl.exp, data=xt, reduce_op=nl.add, reduce_res=sums,
                                   bias=neg_max, dtype=nl.float32)
        inv = nisa.reciprocal(sums)
        yt = nisa.tensor_scalar(e, nl.multiply, inv, dtype=x.dtype)
        nisa.dma_copy(dst=y[t * P:(t + 1) * P, :], src=yt)
    return y

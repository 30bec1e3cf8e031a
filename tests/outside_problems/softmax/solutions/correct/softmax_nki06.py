import nki
import nki.language as nl
import nki.isa as nisa


@nki.jit
def softmax(x):
    rows, d = x.shape
    P = 128
    y = nl.ndarray((rows, d), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(rows // P):
        xt = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[t * P:(t + 1) * P, :])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.max, data=xt, axis=1, negate=True, keepdims=True)
        e = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        sums = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e, op=nl.exp, data=xt, reduce_op=nl.add, reduce_res=sums,
                               bias=neg_max)
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=sums)
        yt = nl.ndarray((P, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=yt, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=y[t * P:(t + 1) * P, :], src=yt)
    return y

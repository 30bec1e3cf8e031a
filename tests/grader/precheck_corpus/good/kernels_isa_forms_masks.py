"""The less common ISA forms: positional tensor_scalar, memset, iota, activation, masks from
nl.arange, nl.ds slices, dst_rmw_op accumulation and fully qualified names."""
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
from neuronxcc.nki.language import par_dim, affine_range


@nki.jit
def vector_add_masked(a_vec, b_vec):
    M = a_vec.shape[0]
    P = nl.tile_size.pmax
    out = nl.ndarray((M, 1), dtype=a_vec.dtype, buffer=nl.shared_hbm)
    a2 = a_vec.reshape((M, 1))
    b2 = b_vec.reshape((M, 1))
    for t in affine_range((M + P - 1) // P):
        i_p = t * P + nl.arange(P)[:, None]
        i_f = nl.arange(1)[None, :]
        a = nl.load(a2[i_p, i_f], mask=(i_p < M))
        b = nl.load(b2[i_p, i_f], mask=(i_p < M))
        s = nisa.tensor_scalar(a, nl.add, 0.0, op1=nl.multiply, operand1=1.0)
        nl.store(out[i_p, i_f], value=nisa.tensor_tensor(s, b, nki.language.add), mask=(i_p < M))
    return out.reshape((M,))


@nki.jit
def scaled_relu(x):
    P, F = x.shape
    out = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray((par_dim(P), F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    ramp = nisa.iota(nl.arange(F)[None, :], dtype=nl.float32)
    zero = nisa.memset(shape=(P, F), value=0.0, dtype=nl.float32)
    y = nisa.activation(op=nl.relu, data=tile, scale=2.0, bias=None)
    y = nisa.tensor_tensor(y, ramp, op=np.multiply)
    y = nisa.tensor_tensor(y, zero, op=np.maximum)
    half = F // 2
    nisa.dma_copy(dst=out[:, nl.ds(0, half)], src=y[:, nl.ds(0, half)])
    nisa.dma_copy(dst=out[:, nl.ds(half, F - half)], src=y[:, nl.ds(half, F - half)])
    nisa.dma_copy(dst=out, src=y, dst_rmw_op=np.add)
    return out


@nki.jit
def row_max(x):
    P, F = x.shape
    out = nl.ndarray((P, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nisa.tensor_reduce(nl.max, t, axis=(1,), keepdims=True)
    v = nisa.tensor_copy(m, engine=nki.isa.constants.engine.vector)
    nl.store(out, value=v)
    return out

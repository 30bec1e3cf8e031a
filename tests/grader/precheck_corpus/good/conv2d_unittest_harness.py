"""A kernel file that carries its own unit tests: unittest.TestCase, a NumPy reference with
sliding_window_view and einsum, np.testing.assert_allclose, and unittest.main under the
`__main__` guard."""
import unittest

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


def reference(X, W, bias, pool_size):
    windows = np.lib.stride_tricks.sliding_window_view(X, W.shape[2:], axis=(2, 3))
    conv = np.einsum("bchwij,ocij->bohw", windows, W) + bias[None, :, None, None]
    if pool_size == 1:
        return conv
    b, c, h, w = conv.shape
    return conv.reshape(b, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    B, C_in, H, Wd = X.shape
    C_out, _, FH, FW = W.shape
    OH, OW = H - FH + 1, Wd - FW + 1
    P = nl.tile_size.pmax
    out = nl.ndarray((B, C_out, OH // pool_size, OW // pool_size), dtype=X.dtype, buffer=nl.hbm)
    for b in nl.affine_range(B):
        for co in nl.affine_range(C_out // P):
            bt = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=bt, src=bias[co * P:(co + 1) * P])
            for r in nl.sequential_range(OH // pool_size):
                acc = nl.zeros((P, pool_size, OW), dtype=nl.float32, buffer=nl.psum)
                for ci in nl.affine_range(C_in // P):
                    w = nl.ndarray((P, P, FH, FW), dtype=W.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=w, src=W[co * P:(co + 1) * P, ci * P:(ci + 1) * P])
                    x = nl.ndarray((P, pool_size + FH - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=x, src=X[b, ci * P:(ci + 1) * P, r * pool_size:r * pool_size + pool_size + FH - 1])
                    for fh in nl.affine_range(FH):
                        for fw in nl.affine_range(FW):
                            wt = nisa.nc_transpose(w[:, :, fh, fw])
                            acc += nisa.nc_matmul(nisa.tensor_copy(wt), x[:, fh:fh + pool_size, fw:fw + OW])
                y = nisa.tensor_tensor(acc, bt, op=nl.add)
                if pool_size == 2:
                    y = nisa.tensor_reduce(op=nl.max, data=y.reshape((P, 2, OW // 2, 2)), axis=[1, 3])
                nisa.dma_copy(dst=out[b, co * P:(co + 1) * P, r], src=nisa.tensor_copy(y, dtype=X.dtype))
    return out


class ConvTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((1, 128, 8, 8), dtype=np.float32)
        self.W = rng.standard_normal((128, 128, 3, 3), dtype=np.float32)
        self.bias = rng.standard_normal(128, dtype=np.float32)

    def test_pool(self):
        for pool in (1, 2):
            with self.subTest(pool=pool):
                got = nki.baremetal(fused_conv2d_maxpool)(self.X, self.W, self.bias, pool_size=pool)
                np.testing.assert_allclose(got, reference(self.X, self.W, self.bias, pool), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    unittest.main()

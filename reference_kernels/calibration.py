"""Kernels matching the hardware experiments the cost model is calibrated on.

trn2-cost-model.md section 4: the vector-add experiments use vector_add.py's factories; the
transpose experiment used the plainest tiled transpose, which is `transpose_per_tile`.

trn2-conv-measurements.md C1..C5: whole conv2d kernels (batch 1, C_in = C_out = 256, 3x3,
stride 1, no padding) described by structure only. The kernels below have that structure
(the same instructions, shapes and counts per output row); they are written for timing and
compute a correct conv2d (pool 1) as a check that they do the work they claim.
"""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

P = 128


def transpose_tiles(a_tensor, copy_engine=nisa.unknown_engine):
    """One 128x128 tile at a time: load, Tensor Engine transpose, PSUM->SBUF copy (on
    `copy_engine`; unknown: the compiler's choice), store."""
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    tile = nl.tile_size.pmax
    for i in nl.affine_range(M // tile):
        for j in nl.affine_range(N // tile):
            a_sb = nl.ndarray((tile, tile), dtype=a_tensor.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_sb, src=a_tensor[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile])
            t_psum = nisa.nc_transpose(a_sb)
            t_sb = nisa.tensor_copy(t_psum, engine=copy_engine)
            nisa.dma_copy(dst=out[j * tile:(j + 1) * tile, i * tile:(i + 1) * tile], src=t_sb)
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def transpose_per_tile(a_tensor):
    """The P3 / B6 transpose: transpose_tiles with its copies where the compiler puts them."""
    return transpose_tiles(a_tensor)


# ----- weights into the stationary layout w_t[ci, ci_tile, kh * 3 + kw, co] ------------------

def weights_by_pe_transpose(W, copy_engine=nisa.unknown_engine, tap_major=False):
    """One DMA per (co tile, ci tile), then 9 Tensor Engine transposes each: 4 DMAs, 36
    nc_transpose and their 36 PSUM->SBUF copies (on `copy_engine`; unknown: the compiler's
    choice) for the graded shape. The DMA reads each partition's 128 x 9 weights contiguously;
    it writes them contiguously too, or with `tap_major` tap by tap ([co, tap, ci] in SBUF, so
    each transpose reads a contiguous row): every element then lands apart from the last, as
    C2's kernel loads them (bench/profile_kernels.py)."""
    C_out, C_in, K, _ = W.shape
    n_co, n_ci, KK = C_out // P, C_in // P, K * K
    w_t = nl.ndarray((P, n_ci, KK, C_out), dtype=W.dtype, buffer=nl.sbuf)
    i_p, i_ci, i_kk = nl.arange(P)[:, None, None], nl.arange(P)[None, :, None], nl.arange(KK)[None, None, :]
    for co in nl.affine_range(n_co):
        for ci in nl.affine_range(n_ci):
            src = W[co * P:(co + 1) * P, ci * P:(ci + 1) * P].reshape((P, P, KK))
            if tap_major:
                rows = nl.ndarray((P, KK, P), dtype=W.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rows[i_p, i_kk, i_ci], src=src[i_p, i_ci, i_kk])
            else:
                rows = nl.ndarray((P, P, KK), dtype=W.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rows, src=src)
            for kk in nl.affine_range(KK):
                w_t[:, ci, kk, co * P:(co + 1) * P] = nisa.tensor_copy(
                    nisa.nc_transpose(rows[:, kk, :] if tap_major else rows[:, :, kk]), engine=copy_engine)
    return w_t


def weights_by_hbm_gather_and_dma_transpose(W):
    """C3: 36 element-granular DMAs W[o0:o0+128, i0:i0+128, h, w] into a 128x128 HBM scratch
    tile each (every element its own descriptor), then a DMA transpose of each into SBUF."""
    C_out, C_in, K, _ = W.shape
    n_co, n_ci, KK = C_out // P, C_in // P, K * K
    w_t = nl.ndarray((P, n_ci, KK, C_out), dtype=W.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(n_co):
        for ci in nl.affine_range(n_ci):
            for kk in nl.affine_range(KK):
                scratch = nl.ndarray((P, P), dtype=W.dtype, buffer=nl.hbm)
                nisa.dma_copy(dst=scratch, src=W[co * P:(co + 1) * P, ci * P:(ci + 1) * P, kk // K, kk % K])
                w_t[:, ci, kk, co * P:(co + 1) * P] = nisa.dma_transpose(scratch)
    return w_t


def weights_by_sbuf_gather(W):
    """C3's contrast: 36 element-granular DMAs of W[o-tile, i-tile, h, w] straight into
    128x128 SBUF tiles, each then transposed on the Tensor Engine."""
    C_out, C_in, K, _ = W.shape
    n_co, n_ci, KK = C_out // P, C_in // P, K * K
    w_t = nl.ndarray((P, n_ci, KK, C_out), dtype=W.dtype, buffer=nl.sbuf)
    for co in nl.affine_range(n_co):
        for ci in nl.affine_range(n_ci):
            for kk in nl.affine_range(KK):
                block = nl.ndarray((P, P), dtype=W.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=block, src=W[co * P:(co + 1) * P, ci * P:(ci + 1) * P, kk // K, kk % K])
                w_t[:, ci, kk, co * P:(co + 1) * P] = nisa.tensor_copy(nisa.nc_transpose(block))
    return w_t


# ----- C1 and C5: one output row per (co tile, row) pair, moving N = 222 ---------------------

def make_row_by_row(rows_per_dma: int, bias_per_pair: bool, copy_windows: bool = False):
    """The row-by-row kernel: for each (co tile, output row) pair, the input rows it needs
    (2 ci tiles x 3 filter rows, `rows_per_dma` rows per DMA), 18 N = W_out matmuls into one
    PSUM tile, a PSUM->SBUF copy, a reduce, the bias (a DMA per pair if `bias_per_pair`, else
    loaded once), the bias add and one output-row DMA.

    C1: rows_per_dma=1, bias_per_pair=True (3,556 DMAs at 224x224); C5's first kernel:
    rows_per_dma=3, bias loaded once (1,338 DMAs); C5's second: rows_per_dma=1, bias once
    (3,112 DMAs). `copy_windows`: each matmul's shifted input window is first copied by a
    `tensor_copy` without `engine=` (C4's 224x224 fp16 kernel: 444 x 18 = 7,992 such copies)."""

    @nki.compiler.skip_middle_end_transformations
    @nki.jit
    def row_by_row(X, W, bias):
        _, C_in, H, Wd = X.shape
        C_out, _, K, _ = W.shape
        n_ci, n_co = C_in // P, C_out // P
        H_out, W_out = H - K + 1, Wd - K + 1
        out = nl.ndarray((1, C_out, H_out, W_out), dtype=X.dtype, buffer=nl.hbm)
        w_t = weights_by_pe_transpose(W)
        bias_hbm = bias.reshape((n_co, P, 1))
        if not bias_per_pair:
            bias_all = nl.ndarray((P, n_co, 1), dtype=bias.dtype, buffer=nl.sbuf)
            for co in nl.affine_range(n_co):
                nisa.dma_copy(dst=bias_all[:, co, :], src=bias_hbm[co])
        for co in nl.affine_range(n_co):
            for h in nl.affine_range(H_out):
                x_rows = nl.ndarray((P, n_ci, K, Wd), dtype=X.dtype, buffer=nl.sbuf)
                for ci in nl.affine_range(n_ci):
                    for kh in nl.affine_range(K // rows_per_dma):
                        r = kh * rows_per_dma
                        nisa.dma_copy(dst=x_rows[:, ci, r:r + rows_per_dma, :],
                                      src=X[0, ci * P:(ci + 1) * P, h + r:h + r + rows_per_dma, :])
                acc = nl.zeros((P, W_out), nl.float32, buffer=nl.psum)
                for ci in nl.affine_range(n_ci):
                    for kh in nl.affine_range(K):
                        for kw in nl.affine_range(K):
                            moving = x_rows[:, ci, kh, kw:kw + W_out]
                            if copy_windows:   # C4: each shifted window copied, engine left open
                                moving = nisa.tensor_copy(moving)
                            acc += nisa.nc_matmul(w_t[:, ci, kh * K + kw, co * P:(co + 1) * P], moving)
                row = nisa.tensor_copy(acc)
                pooled = nisa.tensor_reduce(nl.max, row.reshape((P, W_out, 1)), axis=2)
                if bias_per_pair:
                    b = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=b, src=bias_hbm[co])
                else:
                    b = bias_all[:, co, :]
                res = nisa.tensor_tensor(pooled, b, op=nl.add, dtype=X.dtype)
                nisa.dma_copy(dst=out[0, co * P:(co + 1) * P, h, :], src=res)
        return out

    return row_by_row


c1_row_by_row = make_row_by_row(1, True)
c5_three_row_dmas = make_row_by_row(3, False)
c5_one_row_dmas = make_row_by_row(1, False)
c4_window_copies = make_row_by_row(3, False, copy_windows=True)


# ----- C2: the 32x16 image with tiny N = 14 matmuls ------------------------------------------

@nki.compiler.skip_middle_end_transformations
@nki.jit
def c2_tiny_matmuls(X, W, bias):
    """Weights by PE transpose; then per (co tile, output row): per ci tile one input DMA of
    128 x 3 x W and 9 N = W_out matmuls into one PSUM tile; a PSUM->SBUF copy and the bias add;
    per row a max reduce and one output DMA."""
    _, C_in, H, Wd = X.shape
    C_out, _, K, _ = W.shape
    n_ci, n_co = C_in // P, C_out // P
    H_out, W_out = H - K + 1, Wd - K + 1
    out = nl.ndarray((1, C_out, H_out, W_out), dtype=X.dtype, buffer=nl.hbm)
    w_t = weights_by_pe_transpose(W, tap_major=True)
    bias_sb = nl.ndarray((P, n_co, 1), dtype=bias.dtype, buffer=nl.sbuf)
    bias_hbm = bias.reshape((n_co, P, 1))
    for co in nl.affine_range(n_co):
        nisa.dma_copy(dst=bias_sb[:, co, :], src=bias_hbm[co])
    for co in nl.affine_range(n_co):
        for h in nl.affine_range(H_out):
            acc = nl.zeros((P, W_out), nl.float32, buffer=nl.psum)
            for ci in nl.affine_range(n_ci):
                x_rows = nl.ndarray((P, K, Wd), dtype=X.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=x_rows, src=X[0, ci * P:(ci + 1) * P, h:h + K, :])
                for kh in nl.affine_range(K):
                    for kw in nl.affine_range(K):
                        acc += nisa.nc_matmul(w_t[:, ci, kh * K + kw, co * P:(co + 1) * P],
                                              x_rows[:, kh, kw:kw + W_out])
            row = nisa.tensor_copy(acc)
            biased = nisa.tensor_tensor(row, bias_sb[:, co, :], op=nl.add, dtype=nl.float32)
            pooled = nisa.tensor_reduce(nl.max, biased.reshape((P, W_out, 1)), axis=2, dtype=X.dtype)
            nisa.dma_copy(dst=out[0, co * P:(co + 1) * P, h, :], src=pooled)
    return out


# ----- C3: weights gathered element by element, then an ordinary row-tiled conv --------------

def conv_rows_tiled(X, w_t, bias, *, memset=True):
    """An ordinary row-tiled conv: as many output rows per matmul as fit one PSUM bank, the
    input rows of each tile loaded with one DMA per ci tile, one store per tile. memset=False:
    no PSUM memset, the first matmul of each accumulation assigns (bench/profiles.py's conv-c/d
    profiles have none)."""
    _, C_in, H, Wd = X.shape
    C_out = w_t.shape[3]
    n_ci, n_co = C_in // P, C_out // P
    K = 3
    H_out, W_out = H - K + 1, Wd - K + 1
    rows = max(1, min(H_out, 512 // W_out))
    while H_out % rows:
        rows -= 1
    out = nl.ndarray((1, C_out, H_out, W_out), dtype=X.dtype, buffer=nl.hbm)
    bias_sb = nl.ndarray((P, n_co, 1), dtype=bias.dtype, buffer=nl.sbuf)
    bias_hbm = bias.reshape((n_co, P, 1))
    for co in nl.affine_range(n_co):
        nisa.dma_copy(dst=bias_sb[:, co, :], src=bias_hbm[co])
    for t in nl.affine_range(H_out // rows):
        x_blk = nl.ndarray((P, n_ci, rows + K - 1, Wd), dtype=X.dtype, buffer=nl.sbuf)
        for ci in nl.affine_range(n_ci):
            nisa.dma_copy(dst=x_blk[:, ci], src=X[0, ci * P:(ci + 1) * P, t * rows:t * rows + rows + K - 1, :])
        for co in nl.affine_range(n_co):
            if memset:
                acc = nl.zeros((P, rows, W_out), nl.float32, buffer=nl.psum)
            else:
                acc = nl.ndarray((P, rows, W_out), dtype=nl.float32, buffer=nl.psum)
            first = not memset
            for ci in nl.affine_range(n_ci):
                for kh in nl.affine_range(K):
                    for kw in nl.affine_range(K):
                        prod = nisa.nc_matmul(w_t[:, ci, kh * K + kw, co * P:(co + 1) * P],
                                              x_blk[:, ci, kh:kh + rows, kw:kw + W_out])
                        if first:
                            acc[...] = prod
                            first = False
                        else:
                            acc += prod
            res = nisa.tensor_tensor(acc, bias_sb[:, co:co + 1, :], op=nl.add, dtype=X.dtype)
            nisa.dma_copy(dst=out[0, co * P:(co + 1) * P, t * rows:(t + 1) * rows, :], src=res)
    return out


@nki.compiler.skip_middle_end_transformations
@nki.jit
def c3_hbm_gather_dma_transpose(X, W, bias):
    return conv_rows_tiled(X, weights_by_hbm_gather_and_dma_transpose(W), bias)


@nki.compiler.skip_middle_end_transformations
@nki.jit
def c3_sbuf_gather(X, W, bias):
    return conv_rows_tiled(X, weights_by_sbuf_gather(W), bias)


@nki.compiler.skip_middle_end_transformations
@nki.jit
def c3_contiguous_weights(X, W, bias):
    """C3's kernel with its weights by contiguous DMAs and PE transposes (measured 53 us)."""
    return conv_rows_tiled(X, weights_by_pe_transpose(W), bias)


# ----- C4: many SBUF->SBUF copies whose engine the kernel leaves to the compiler -------------

@nki.compiler.skip_middle_end_transformations
@nki.jit
def c4_unplaced_copies(a, count):
    """`count` independent SBUF->SBUF `tensor_copy` calls without `engine=`, then one store."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=a)
    for _ in nl.affine_range(count):
        copied = nisa.tensor_copy(src)
    nisa.dma_copy(dst=out, src=copied)
    return out

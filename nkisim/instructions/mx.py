"""NeuronCore-v4's MX (OCP microscaling) instructions: nisa.quantize_mx on the Vector engine and
nisa.nc_matmul_mx on the Tensor Engine (NKI 0.6 reference; Trainium3 architecture guide, "Quad-
MXFP8/MXFP4 Matmul Performance" and "MX data-type Quantization"; the MXFP matmul deep dive).

Layout, as those pages give it:
- an x4 element packs four values of the contraction (K) dimension: float8_e5m2_x4 and
  float8_e4m3fn_x4 are 32-bit (value j in byte j, the order of four contiguous FP8 bytes in
  memory), float4_e2m1fn_x4 is 16-bit (value j in bits 4j..4j+3: nkisim's reading, the docs
  give the width but not the nibble order). Quantizing a [P, F] tile packs src[p, 4f + j] into
  dst[p, f], value j;
- a scaling group is 8 partitions x one x4 element (32 values); its scale, one byte (the OCP
  E8M0 exponent, 2**(b - 127), 0xFF NaN: float8_e8m0fnu, or the same bits as uint8), sits in the
  SBUF quadrant (32 partitions) its group comes from: data partition p of a tile has its scale
  on row 32 * (p // 32) + (p % 32) // 8 of the scale tile, in the data element's column. So a
  32-partition tile's scales are 4 rows, a 128-partition tile's rows 0-3, 32-35, 64-67, 96-99
  (the other rows are free for other tiles' scales: each instruction reads and writes only its
  own rows).
The contraction is over partitions and the four values of each element: which of the K indices
a (p, j) pair stands for is the kernel's layout, and the sum is the same.
"""
from __future__ import annotations

from .. import dtypes
from ..errors import ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..platforms import current_rules
from ..registry import instruction
from ..trace import Engine
from .common import SBUF_ONLY, free_size, operand, partitions, pe_tile_pairs

QUADRANT = 32                # partitions of an SBUF quadrant
GROUP_PARTITIONS = 8         # a scaling group: 8 partitions x the 4 values of one x4 element
SCALE_ROWS = QUADRANT // GROUP_PARTITIONS      # scale rows a quadrant of data needs
MX_DATA = ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4")
QUANTIZED = ("float8_e5m2_x4", "float8_e4m3fn_x4")      # quantize_mx writes FP8 only
SCALE_TYPES = ("float8_e8m0fnu", "uint8")
_DTYPE_CODE = "err_instruction_unsupported_dtypes"
TRN3_REMEDY = ('trace the kernel for Trainium3: set the spec\'s platform = "trn3", or SimSettings(platform="trn3"), '
               "or NEURON_PLATFORM_TARGET_OVERRIDE=trn3")


def require_nc_v4(instr: str, instead: str = "") -> None:
    """Refuse an instruction the reference marks "Available only on NeuronCore-v4 and newer";
    `instead` says what the older generations do in its place."""
    rules = current_rules()
    if rules.nc_version < 4:
        raise UnsupportedOperationError(
            f"nisa.{instr} is available only on NeuronCore-v4 and newer (Trainium3, trn3); this kernel is traced "
            f"for {rules.name} ({rules.hardware})", remedy=TRN3_REMEDY + (f"; {instead}" if instead else ""),
            code="err_instruction_unsupported_on_target")


def _dtype_in(t, allowed: tuple, instr: str, param: str) -> str:
    name = dtypes.name_of(t.dtype)
    if name not in allowed:
        raise UnsupportedOperationError(f"'{param}' of 'nisa.{instr}' is {name}; it must be one of {', '.join(allowed)}",
                                        code=_DTYPE_CODE)
    return name


def _mx_partitions(parts: int, instr: str, what: str, limit: int = 128) -> None:
    if parts % QUADRANT or not 0 < parts <= limit:
        raise ShapeError(f"the partition dimension of {what} of 'nisa.{instr}' is {parts}; it must be a multiple of "
                         f"{QUADRANT} and at most {limit}", remedy="tile the contraction by 32, 64, 96 or 128 partitions",
                         code="err_param_shape_mismatch")


def scale_rows(t, data_parts: int, instr: str, param: str) -> list:
    """The rows of the scale tile `t` that hold the scales of a `data_parts`-partition data
    tile: one [4, F] slice per quadrant of the data, in quadrant order."""
    operand(t, instr, param, SBUF_ONLY)
    _dtype_in(t, SCALE_TYPES, instr, param)
    quadrants = data_parts // QUADRANT
    needed = (quadrants - 1) * QUADRANT + SCALE_ROWS
    if partitions(t) < needed:
        raise ShapeError(f"'{param}' of 'nisa.{instr}' spans {partitions(t)} partitions, but the scales of "
                         f"{data_parts} data partitions lie on rows 32*q + 0..3 of each quadrant q (up to row "
                         f"{needed - 1})", remedy=f"allocate the scale tile with {data_parts if quadrants > 1 else 4} "
                                                 "partitions (the deep dive's [P, F//4], or [P//8, F//4] for P <= 32)",
                         code="err_param_shape_mismatch")
    flat = t if len(t.shape) == 2 else t.reshape((partitions(t), free_size(t)))
    return [flat[q * QUADRANT:q * QUADRANT + SCALE_ROWS] for q in range(quadrants)]


def _free_matches(scale_slices: list, data, instr: str, param: str) -> None:
    if free_size(scale_slices[0]) != free_size(data):
        raise ShapeError(f"'{param}' of 'nisa.{instr}' holds {free_size(scale_slices[0])} scales a row; its data "
                         f"holds {free_size(data)} x4 elements a partition (one scale each per group of 8 partitions)",
                         remedy="give the scale tile the data tile's free size", code="err_param_shape_mismatch")


@instruction("quantize_mx", Engine.VECTOR, kinds=("quantize_mx",))
def quantize_mx(m, src, dst, dst_scale):
    """src (float16/bfloat16, [P, F] in the interleaved layout) quantized into dst ([P, F/4],
    float8_e5m2_x4 or float8_e4m3fn_x4) and one E8M0 scale a group into dst_scale's rows of
    each quadrant. Each group's scale is twice OCP's sample conversion (0.6 reference: "a
    block scale that is two times larger"); nkisim.kinds.mx computes it."""
    instr = "quantize_mx"
    require_nc_v4(instr)
    operand(src, instr, "src", SBUF_ONLY)
    operand(dst, instr, "dst", SBUF_ONLY)
    _dtype_in(src, ("float16", "bfloat16"), instr, "src")
    if dtypes.name_of(dst.dtype) == "float4_e2m1fn_x4":
        raise UnsupportedOperationError("'dst' of 'nisa.quantize_mx' is float4_e2m1fn_x4: the instruction quantizes "
                                        "to MXFP8 only (nc_matmul_mx takes FP4 data quantized elsewhere)",
                                        remedy="quantize to float8_e4m3fn_x4 or float8_e5m2_x4", code=_DTYPE_CODE)
    _dtype_in(dst, QUANTIZED, instr, "dst")
    parts = partitions(src)
    _mx_partitions(parts, instr, "src")
    n = free_size(src)
    if n % 4:
        raise ShapeError(f"the free size of 'src' of 'nisa.quantize_mx' is {n}; it must be a multiple of 4 (four values "
                         "make one x4 element)", code="err_param_shape_mismatch")
    if partitions(dst) != parts or free_size(dst) != n // 4:
        raise ShapeError(f"'dst' of 'nisa.quantize_mx' is {dst._label()}; for src {src._label()} it must have "
                         f"{parts} partitions and {n // 4} x4 elements a partition (a quarter of src's)",
                         code="err_param_shape_mismatch")
    scales = scale_rows(dst_scale, parts, instr, "dst_scale")
    _free_matches(scales, dst, instr, "dst_scale")
    for t in (dst, dst_scale):
        t._alloc.written = True
    m.emit(instr, Engine.VECTOR, "quantize_mx", [src], [dst] + scales)


@instruction("nc_matmul_mx", Engine.TENSOR, kinds=("mx_matmul",))
def nc_matmul_mx(m, dst, stationary, moving, stationary_scale, moving_scale, *, tile_position=None,
                 tile_size=None):
    """dst[m, n] = sum over partitions k and values j of
    (stationary[k, m, j] * its scale) * (moving[k, n, j] * its scale), in fp32 (the engine's
    accumulation), rounded into dst (float32 or bfloat16 PSUM). The binding decides whether the
    record accumulates into dst (accumulate=)."""
    instr = "nc_matmul_mx"
    require_nc_v4(instr)
    for t, param in ((stationary, "stationary"), (moving, "moving")):
        operand(t, instr, param, SBUF_ONLY)
        _dtype_in(t, MX_DATA, instr, param)
    if dst._alloc.buffer is not Buffer.PSUM:
        raise UnsupportedOperationError(f"'dst' of 'nisa.nc_matmul_mx' must be a PSUM tile, got {dst._label()}",
                                        remedy="allocate it with nl.ndarray(..., buffer=nl.psum)",
                                        code="err_unsupported_memory")
    out = _dtype_in(dst, ("float32", "bfloat16"), instr, "dst")
    k, k2 = partitions(stationary), partitions(moving)
    if k != k2:
        raise ShapeError(f"the partition sizes of 'nisa.nc_matmul_mx' differ: stationary {stationary._label()} has "
                         f"{k}, moving {moving._label()} {k2}", code="err_param_shape_incompatible_with_matmul")
    rows = _tiling(tile_position, tile_size, instr)
    _mx_partitions(k, instr, "stationary and moving", rows)
    m_size, n_size = free_size(stationary), free_size(moving)
    if m_size % 2 or not 0 < m_size <= 128:
        raise ShapeError(f"the free size of 'stationary' of 'nisa.nc_matmul_mx' is {m_size}; it must be even and at "
                         "most 128", code="err_param_shape_mismatch")
    n_limit = 512 if out == "float32" else 1024
    if n_size > n_limit:
        raise ShapeError(f"the free size of 'moving' of 'nisa.nc_matmul_mx' is {n_size}; with a {out} dst it may be "
                         f"at most {n_limit}", remedy="tile the moving operand's free dimension",
                         code="err_param_shape_mismatch")
    if partitions(dst) != m_size or free_size(dst) != n_size:
        raise ShapeError(f"'dst' of 'nisa.nc_matmul_mx' is {dst._label()}; the product is [{m_size}, {n_size}] "
                         "(stationary's free size by moving's)", code="err_param_shape_mismatch")
    s_scales = scale_rows(stationary_scale, k, instr, "stationary_scale")
    m_scales = scale_rows(moving_scale, k, instr, "moving_scale")
    _free_matches(s_scales, stationary, instr, "stationary_scale")
    _free_matches(m_scales, moving, instr, "moving_scale")
    dst._alloc.written = True
    return m.emit(instr, Engine.TENSOR, "mx_matmul", [stationary, moving] + s_scales + m_scales, [dst],
                  k=k, m=m_size, n=n_size)


def _tiling(tile_position, tile_size, instr: str) -> int:
    """The PE rows the instruction may use: 128, or the row tile of row tiling mode (the only
    tiling nc_matmul_mx has: tile_size (row_size, 128), tile_position (start_row, 0))."""
    if tile_position is None and tile_size is None:
        return 128
    if tile_position is None or tile_size is None:
        raise UnsupportedOperationError(f"tile_position and tile_size of 'nisa.{instr}' must be given together",
                                        code="err_unsupported_args")
    row_size, column_size, start_row, start_column = pe_tile_pairs(tile_position, tile_size, instr)
    if row_size not in (32, 64, 128) or column_size != 128:
        raise UnsupportedOperationError(f"tile_size of 'nisa.{instr}' is {tile_size!r}: row_size must be 128, 64 or 32 "
                                        "and column_size 128 (only row tiling)", code="err_unsupported_args")
    if start_column != 0 or start_row % row_size or not 0 <= start_row < 128:
        raise UnsupportedOperationError(f"tile_position of 'nisa.{instr}' is {tile_position!r}: start_row must be a "
                                        "multiple of row_size below 128 and start_column 0", code="err_unsupported_args")
    return row_size

"""Values of NeuronCore-v4's instructions: the MX matmul and quantization (nkisim.instructions.mx
gives the layout), the Vector engine's exponential and rand2, the Scalar engine's activate2.
Each reads its params and the dtypes of its regions as untrusted data: a forged record raises."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import alu
from .accumulate import reduce_into
from .values import f32, operand_value, per_partition, value_kind

_QUADRANT, _GROUP, _SCALE_ROWS = 32, 8, 4
_FP8 = {"float8_e5m2_x4": np.dtype(ml_dtypes.float8_e5m2), "float8_e4m3fn_x4": np.dtype(ml_dtypes.float8_e4m3fn)}
_FP4 = "float4_e2m1fn_x4"
_FP4_TYPE = np.dtype(ml_dtypes.float4_e2m1fn)
# the largest exponent of each FP8 element type's normals: OCP MX's emax_elem (e4m3fn 448 = 1.75 * 2**8)
_EMAX = {"float8_e5m2_x4": 15, "float8_e4m3fn_x4": 8}
_SCALES = ("float8_e8m0fnu", "uint8")
_E8M0_BIAS, _E8M0_NAN = 127, 255


def _parts(x: np.ndarray) -> int:
    return x.shape[0] if x.ndim else 1


def unpack_x4(words: np.ndarray, fmt: str) -> np.ndarray:
    """[P, F] x4 elements as [P, F, 4] fp32 values (value j of each element last)."""
    words = np.asarray(words)
    parts = _parts(words)
    if fmt in _FP8:
        raw = np.ascontiguousarray(words.reshape(parts, -1)).astype("<u4").view(np.uint8)
        return raw.reshape(parts, -1, 4).view(_FP8[fmt]).astype(np.float32)
    if fmt == _FP4:
        w = np.ascontiguousarray(words.reshape(parts, -1)).astype(np.uint16)
        nibbles = np.stack([(w >> (4 * j)) & 0xF for j in range(4)], axis=-1).astype(np.uint8)
        return nibbles.view(_FP4_TYPE).astype(np.float32)
    raise ValueError(f"{fmt!r} is not an x4-packed MX type")


def pack_fp8_x4(values: np.ndarray, fmt: str) -> np.ndarray:
    """[P, F, 4] values already in the FP8 type's range as [P, F] uint32 words (value j in byte j)."""
    raw = np.ascontiguousarray(values.astype(_FP8[fmt])).view(np.uint8)
    return raw.reshape(values.shape[0], -1, 4).view("<u4").reshape(values.shape[0], -1).astype(np.uint32)


def _scale_bytes(value: np.ndarray, dtype: str) -> np.ndarray:
    if dtype not in _SCALES:
        raise ValueError(f"an MX scale is float8_e8m0fnu or uint8, not {dtype}")
    return np.ascontiguousarray(np.asarray(value)).view(np.uint8)


def _scale_values(slices: list, regions: list, parts: int, free: int) -> np.ndarray:
    """[parts, free] fp32 scales, each data partition's from its quadrant's rows."""
    if len(slices) != parts // _QUADRANT:
        raise ValueError("an MX operand reads one [4, F] scale slice a quadrant of its data")
    rows = []
    for value, region in zip(slices, regions):
        codes = _scale_bytes(value, region.dtype).reshape(-1, free) if free else np.zeros((_SCALE_ROWS, 0), np.uint8)
        if codes.shape[0] != _SCALE_ROWS:
            raise ValueError("a quadrant's MX scales are 4 rows")
        rows.append(np.repeat(codes, _GROUP, axis=0))          # data partition 8r..8r+7 -> scale row r
    codes = np.concatenate(rows, axis=0)
    return codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)


@value_kind("mx_matmul", reads=None, writes=1)
def mx_matmul(rec, values):
    """[stationary, moving, stationary's scale slices, moving's]: out[m, n] = the fp32 sum over
    partitions k and values j of the dequantized stationary[k, m, j] times moving[k, n, j]."""
    if len(values) < 4 or len(values) % 2:
        raise ValueError("an MX matmul reads its two data tiles and a scale slice per quadrant of each")
    s_fmt, m_fmt = rec.reads[0].dtype, rec.reads[1].dtype
    s, mv = unpack_x4(values[0], s_fmt), unpack_x4(values[1], m_fmt)
    k = s.shape[0]
    if mv.shape[0] != k or k % _QUADRANT:
        raise ValueError("the MX operands share a contraction of a multiple of 32 partitions")
    q = k // _QUADRANT
    if len(values) != 2 + 2 * q:
        raise ValueError(f"an MX matmul over {k} partitions reads {q} scale slices of each operand")
    s_scale = _scale_values(values[2:2 + q], rec.reads[2:2 + q], k, s.shape[1])
    m_scale = _scale_values(values[2 + q:], rec.reads[2 + q:], k, mv.shape[1])
    a = (s * s_scale[:, :, None]).transpose(0, 2, 1).reshape(k * 4, -1)      # (k, j) by m
    b = (mv * m_scale[:, :, None]).transpose(0, 2, 1).reshape(k * 4, -1)     # (k, j) by n
    return [(a.T @ b).astype(np.float32)]


@value_kind("quantize_mx", reads=1, writes=None)
def quantize_mx(rec, values):
    """[src] -> [dst's x4 words, then each quadrant's 4 scale rows]. A group (8 partitions by 4
    values) gets the E8M0 scale 2**(floor(log2(amax)) - emax + 1), twice OCP's sample conversion
    (0.6 reference), so amax / scale < 2**emax and no value saturates; each value / scale is
    rounded to nearest even into the FP8 type. An all-zero group gets the smallest scale
    (2**-127, its values 0: nkisim's choice, OCP leaves it open); a group holding NaN or Inf
    gets the NaN scale (0xFF) and NaN values (OCP's rule for a NaN scale)."""
    fmt = rec.writes[0].dtype
    if fmt not in _EMAX:
        raise ValueError(f"quantize_mx writes float8_e5m2_x4 or float8_e4m3fn_x4, not {fmt}")
    x = f32(values[0])
    parts = _parts(x)
    x = x.reshape(parts, -1)
    if parts % _QUADRANT or x.shape[1] % 4 or len(rec.writes) != 1 + parts // _QUADRANT:
        raise ValueError("quantize_mx quantizes 32-partition quadrants of 4-value elements into their scale rows")
    f4 = x.shape[1] // 4
    groups = x.reshape(parts // _GROUP, _GROUP, f4, 4)
    amax = np.abs(groups).max(axis=(1, 3))
    finite = np.isfinite(amax)
    _, exponent = np.frexp(np.where(finite & (amax > 0), amax, np.float32(1)))
    scale_exp = np.clip(exponent.astype(np.int32) - 1 - _EMAX[fmt] + 1, -_E8M0_BIAS, _E8M0_BIAS)
    scale_exp = np.where(amax > 0, scale_exp, -_E8M0_BIAS)
    codes = np.where(finite, scale_exp + _E8M0_BIAS, _E8M0_NAN).astype(np.uint8)
    scale = np.where(finite, np.ldexp(np.float32(1), scale_exp), np.float32(np.nan)).astype(np.float32)
    q = groups / scale[:, None, :, None]
    big = float(ml_dtypes.finfo(_FP8[fmt]).max)
    q = np.where(np.isnan(q), q, np.clip(q, -big, big))       # a guard: the scale keeps them in range
    words = pack_fp8_x4(q.reshape(parts, f4, 4), fmt)
    out = [words]
    for quadrant in range(parts // _QUADRANT):
        rows = codes[quadrant * _SCALE_ROWS:(quadrant + 1) * _SCALE_ROWS]
        region = rec.writes[1 + quadrant]
        if region.dtype not in _SCALES:
            raise ValueError(f"an MX scale is float8_e8m0fnu or uint8, not {region.dtype}")
        out.append(rows.view(ml_dtypes.float8_e8m0fnu) if region.dtype == "float8_e8m0fnu" else rows)
    return out


@value_kind("exponential", reads=None, writes=None)
def exponential(rec, values):
    """[exp(src - max_value) in fp32, then the registers (and reduce_res) when it reduces]: the
    free-axis sum of the fp32 results joins the registers (nkisim.kinds.accumulate)."""
    src = f32(values[0])
    parts = _parts(src)
    out = np.exp(src - per_partition(operand_value(rec.params["max"], values), parts, src.ndim)).astype(np.float32)
    reduction = rec.params.get("reduce")
    if reduction is None:
        return [out]
    if reduction.get("op") != "add":
        raise ValueError("nisa.exponential reduces by addition")
    partial = out.reshape(parts, -1).sum(axis=1, dtype=np.float32)
    return [out] + reduce_into(reduction, values, partial)


_RAND2_STREAM = 0x7261_6E32       # keeps rand2's draws apart from rng's and dropout's
_MAX_SEED = 2 ** 63


@value_kind("rand2", reads=None, writes=1)
def rand2(rec, values):
    """[min + bits / 2**32 * (max - min)] in fp32, the bits nkisim's own from the record's seed."""
    seed = rec.params.get("seed")
    if type(seed) is not int or not 0 <= seed < _MAX_SEED:
        raise ValueError(f"a rand2 record has a seed in [0, 2**63), got {seed!r}")
    shape = tuple(rec.writes[0].shape)
    parts = shape[0] if shape else 1
    lo = per_partition(operand_value(rec.params["min"], values), parts, len(shape))
    hi = per_partition(operand_value(rec.params["max"], values), parts, len(shape))
    bits = np.random.default_rng([_RAND2_STREAM, seed]).integers(0, 2 ** 32, size=shape, dtype=np.uint64)
    u = (bits.astype(np.float64) / 2.0 ** 32).astype(np.float32)
    return [np.minimum(lo + u * (hi - lo), hi).astype(np.float32)]


_IDENTITY = {"add": 0.0, "maximum": -np.inf, "minimum": np.inf, "abs_max": 0.0, "abs_min": np.inf}


def _reduce(name: str, x: np.ndarray) -> np.ndarray:
    if name == "add":
        return x.sum(axis=1, dtype=np.float32)
    if name in ("maximum", "abs_max"):
        return (np.abs(x) if name == "abs_max" else x).max(axis=1, initial=-np.inf)
    if name in ("minimum", "abs_min"):
        return (np.abs(x) if name == "abs_min" else x).min(axis=1, initial=np.inf)
    raise ValueError(f"{name!r} is not a reduction of activate2")


def _combine(name: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    return old + new if name == "add" else np.maximum(old, new) if name in ("maximum", "abs_max") \
        else np.minimum(old, new)


_STAGES = ("multiply", "add", "subtract")


@value_kind("activate2", reads=None, writes=None)
def activate2(rec, values):
    """[op((data op0 imm0) op1 imm1), then reduce_res when it reduces], in fp32."""
    p = rec.params
    data = f32(values[0])
    parts = _parts(data)
    val = data
    for stage, imm, reverse in (("op0", "imm0", "reverse0"), ("op1", "imm1", "reverse1")):
        name = p[stage]
        if name == "bypass":
            continue
        if name not in _STAGES:
            raise ValueError(f"{name!r} is not a tensor-scalar stage of activate2")
        fn = alu.OPS[name].fn
        operand = per_partition(operand_value(p[imm], values), parts, data.ndim)
        val = f32(fn(operand, val) if p[reverse] else fn(val, operand))
    if p["op"] == "prelu":
        alpha = per_partition(operand_value(p["relu"], values), parts, data.ndim)
        out = np.where(val >= 0, val, alpha * val).astype(np.float32)
    else:
        out = f32(alu.activation_op(p["op"]).fn(val))
    reduction = p.get("reduce")
    if reduction is None:
        return [out]
    name, how = reduction["op"], reduction["how"]
    if name not in _IDENTITY:
        raise ValueError(f"{name!r} is not a reduction of activate2")
    if how == "identity":
        register = np.full(parts, _IDENTITY[name], dtype=np.float32)
    else:
        register = _reduce(name, out.reshape(parts, -1)).astype(np.float32)
        if how == "continue":
            register = _combine(name, f32(values[reduction["read"]]).reshape(parts), register)
        elif how != "reset":
            raise ValueError(f"unknown activate2 reduction start {how!r}")
    return [out, np.asarray(register, dtype=np.float32).reshape(parts, 1)]

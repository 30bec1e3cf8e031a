"""NKI data types on NumPy storage, type promotion, and the one function that rounds values
to a simulated dtype (`cast`). Storage uses the real narrow type (float16, ml_dtypes'
bfloat16 and fp8), so a value written to a 16-bit tile is rounded exactly once, on write."""
from __future__ import annotations

import ml_dtypes
import numbers

import numpy as np

from .errors import DtypeError
from .facade import NotSimulated

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
# tf32 (1 sign, 8 exponent, 10 mantissa bits) is stored as float32 whose low 13 mantissa
# bits are rounded away; the metadata keeps its name so `cast` knows to round.
tfloat32 = np.dtype(np.float32, metadata={"nki_name": "tfloat32"})
# NeuronCore-v4's MX types (NKI 0.5+): the OCP MX scale, a power of two (ml_dtypes' e8m0fnu:
# bias 127, 0xFF NaN), and the x4-packed element types nc_matmul_mx multiplies, stored as the
# unsigned word that holds the four values (nkisim.instructions.mx says which bits are which);
# the metadata keeps their NKI name, as tfloat32's does
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
float8_e5m2_x4 = np.dtype(np.uint32, metadata={"nki_name": "float8_e5m2_x4"})
float8_e4m3fn_x4 = np.dtype(np.uint32, metadata={"nki_name": "float8_e4m3fn_x4"})
float4_e2m1fn_x4 = np.dtype(np.uint16, metadata={"nki_name": "float4_e2m1fn_x4"})
PACKED_X4 = {"float8_e5m2_x4": float8_e5m2_x4, "float8_e4m3fn_x4": float8_e4m3fn_x4,
             "float4_e2m1fn_x4": float4_e2m1fn_x4}
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)

FLOAT_TYPES = (float32, float16, bfloat16, float8_e4m3, float8_e5m2, float8_e8m0fnu)
SUPPORTED = {float32, float16, bfloat16, float8_e4m3, float8_e5m2, float8_e8m0fnu,
             int8, int16, int32, uint8, uint16, uint32, bool_}
# Inputs the Tensor Engine multiplies (nc_matmul / nc_transpose on PE).
MATMUL_INPUT_TYPES = {float32, float16, bfloat16, float8_e4m3, float8_e5m2}

_BY_NAME = {
    "float32": float32, "fp32": float32, "float16": float16, "fp16": float16,
    "bfloat16": bfloat16, "bf16": bfloat16, "tfloat32": tfloat32,
    "float8_e4m3": float8_e4m3, "float8_e5m2": float8_e5m2,
    "int8": int8, "int16": int16, "int32": int32, "uint8": uint8, "uint16": uint16,
    "uint32": uint32, "bool": bool_, "bool_": bool_, "float8_e8m0fnu": float8_e8m0fnu, **PACKED_X4,
}


_NAMES: dict = {}


def name_of(dtype: np.dtype) -> str:
    """The NKI name of a dtype (cached: NumPy's dtype.name is slow)."""
    if dtype.metadata:
        return dtype.metadata.get("nki_name", dtype.name)
    try:
        return _NAMES[dtype]
    except KeyError:
        name = _NAMES[dtype] = "bool" if dtype == bool_ else dtype.name
        return name


def is_packed_x4(dtype: np.dtype) -> bool:
    """One of the x4-packed MX element types (four values in one element)."""
    return bool(dtype.metadata) and dtype.metadata.get("nki_name") in PACKED_X4


def is_tf32(dtype: np.dtype) -> bool:
    return bool(dtype.metadata and dtype.metadata.get("nki_name") == "tfloat32")


def to_dtype(value) -> np.dtype:
    """Normalise anything a kernel may pass as `dtype=` (np.float32, nl.bfloat16, 'fp16', a
    tensor's .dtype) to a NumPy dtype, or raise DtypeError naming what is allowed."""
    if isinstance(value, np.dtype):
        dt = value
    elif isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    else:
        try:
            dt = np.dtype(value)
        except TypeError:
            dt = None
    if dt is not None and (dt in SUPPORTED or is_tf32(dt) or is_packed_x4(dt)):
        return dt
    if isinstance(value, NotSimulated):      # a documented dtype nkisim does not simulate: say so
        raise value._error()
    raise DtypeError(f"unsupported dtype {value!r}",
                     remedy="use one of nl.float32, nl.float16, nl.bfloat16, nl.tfloat32, "
                            "nl.float8_e4m3, nl.float8_e5m2, nl.int8/16/32, nl.uint8/16/32, nl.bool_",
                     code="err_unsupported_dtype_value")


def is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype in FLOAT_TYPES


def _round_tf32(values: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    # round to nearest even on the 13 dropped mantissa bits
    rounded = (bits + np.uint32(0xFFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    return rounded.view(np.float32)


def cast(values, dtype: np.dtype) -> np.ndarray:
    """Round `values` to `dtype`: the single place where precision is lost on a write."""
    if is_tf32(dtype):
        return _round_tf32(np.asarray(values, dtype=np.float32))
    arr = np.asarray(values)
    if arr.dtype == dtype:
        return arr
    if dtype.kind in "iu" and arr.dtype.kind == "f":
        # hardware float->int conversion saturates rather than wrapping
        info = np.iinfo(dtype)
        arr = np.clip(np.nan_to_num(arr), info.min, info.max)
    return arr.astype(dtype)


# --- type promotion for two-input arithmetic (nki.api.shared "type promotion") ---
_FLOAT_RANK = {float8_e4m3: 1, float8_e5m2: 1, bfloat16: 2, float16: 2, float32: 3}


def _promote_floats(a: np.dtype, b: np.dtype) -> np.dtype:
    if a == b:
        return a
    ra, rb = _FLOAT_RANK.get(a, 3), _FLOAT_RANK.get(b, 3)
    if ra != rb:
        return a if ra > rb else b
    # same width, different formats: widen
    return bfloat16 if ra == 1 else float32


def _promote_ints(a: np.dtype, b: np.dtype) -> np.dtype:
    if a == b:
        return a
    if (a.kind == "u") == (b.kind == "u"):
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    widened = {1: int16, 2: int32}.get(unsigned.itemsize)
    return widened if widened is not None else float32


_PROMOTED: dict = {}


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """The result dtype of an operation on `a` and `b` (cached per pair of dtype objects: NumPy's
    dtype comparisons cost ~0.3 us each; by identity, since tf32 differs from float32 only in
    metadata, which dtype equality ignores)."""
    found = _PROMOTED.get((id(a), id(b)))
    if found is not None and found[0] is a and found[1] is b:
        return found[2]
    result = _promote(a, b)
    if len(_PROMOTED) < 1024:         # the entry holds a and b, so their ids stay theirs
        _PROMOTED[(id(a), id(b))] = (a, b, result)
    return result


# ids of the canonical dtype objects d for which promote(d, d) is d itself (all supported types
# but bool, which promotes to uint8): an instruction on two tiles of one such type skips promote
SELF_PROMOTING = frozenset(id(d) for d in SUPPORTED if d != bool_)


def _promote(a: np.dtype, b: np.dtype) -> np.dtype:
    a = bool_ if a == bool_ else a
    if a == bool_:
        a = uint8
    if b == bool_:
        b = uint8
    if is_tf32(a) or is_tf32(b):
        return float32
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        return _promote_floats(a, b)
    if fa or fb:
        return a if fa else b
    return _promote_ints(a, b)


def scalar_dtype(value) -> np.dtype:
    """Python scalars are weakly typed: bool -> uint8, int -> int32, float -> float32."""
    if isinstance(value, (bool, np.bool_)):
        return uint8
    if isinstance(value, (int, np.integer)):
        return int32
    return float32


def plain_number(value):
    """A plain Python number from a kernel's scalar (np.float32(2), True, 3): a traced
    program carries values of its own types only, never a kernel's object."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (numbers.Integral, np.integer)):
        return int(value)
    return float(value)

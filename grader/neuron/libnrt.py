"""The Neuron runtime's C library (libnrt), bound with ctypes: how the legacy line (SDK 2.26,
no nrtpy) reads a NEFF's outputs back without the kernel's Python.

Every call and struct is as neuron-runtime/api/nrt.rst and src/libnrt/include/nrt/nrt.h,
nrt_experimental.h and nrt_status.h (aws-neuron-sdk) declare them; nrtpy wraps the same calls.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

NRT_SUCCESS = 0
NRT_FRAMEWORK_TYPE_NO_FW = 1               # nrt_framework_type_t: framework-less execution
NRT_TENSOR_PLACEMENT_DEVICE = 0            # nrt_tensor_placement_t
NRT_TENSOR_USAGE_INPUT, NRT_TENSOR_USAGE_OUTPUT = 0, 1
NRT_TENSOR_NAME_MAX = 256
STATUS_NAMES = {1: "NRT_FAILURE", 2: "NRT_INVALID", 3: "NRT_INVALID_HANDLE", 4: "NRT_RESOURCE",
                5: "NRT_TIMEOUT", 6: "NRT_HW_ERROR", 7: "NRT_QUEUE_FULL", 9: "NRT_LOAD_NOT_ENOUGH_NC",
                10: "NRT_UNSUPPORTED_NEFF_VERSION", 13: "NRT_UNINITIALIZED", 14: "NRT_CLOSED",
                1002: "NRT_EXEC_BAD_INPUT", 1003: "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
                1004: "NRT_EXEC_COMPLETED_WITH_ERR", 1005: "NRT_EXEC_NC_BUSY", 1006: "NRT_EXEC_OOB"}


def _dtypes() -> dict[int, np.dtype]:
    """nrt_dtype_t -> NumPy (nrt.h); fp32r and the fp8 formats have no NumPy twin: raw bytes."""
    import ml_dtypes
    return {0x7: np.dtype(np.float16), 0x6: np.dtype(ml_dtypes.bfloat16), 0xA: np.dtype(np.float32),
            0x3: np.dtype(np.uint8), 0x5: np.dtype(np.uint16), 0x9: np.dtype(np.uint32),
            0x1: np.dtype(np.uint64), 0x2: np.dtype(np.int8), 0x4: np.dtype(np.int16),
            0x8: np.dtype(np.int32), 0xC: np.dtype(np.int64)}


class NrtTensorInfo(ctypes.Structure):           # nrt_tensor_info_t (nrt_experimental.h)
    _fields_ = [("name", ctypes.c_char * NRT_TENSOR_NAME_MAX), ("usage", ctypes.c_int),
                ("size", ctypes.c_size_t), ("dtype", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_uint32)), ("ndim", ctypes.c_uint32)]


class NrtTensorInfoArray(ctypes.Structure):      # nrt_tensor_info_array_t: a count, then the array
    _fields_ = [("tensor_count", ctypes.c_uint64)]


class NrtInstanceInfo(ctypes.Structure):         # nrt_instance_info_t (nrt.h); its length is passed along
    _fields_ = [("family", ctypes.c_uint32), ("size", ctypes.c_uint32), ("arch_name", ctypes.c_char * 16),
                ("device_revision", ctypes.c_char * 8)]


# nrt.h's NRT_INSTANCE_* families (as AWS spells the instance families), by the platform whose
# logical-NeuronCore default they take
TRN1_FAMILIES = {2: "Trn1", 3: "Trn1n", 4: "Inf2", 7: "Inf2e"}
TRN2_FAMILIES = {5: "Trn2", 6: "Trn2n", 8: "Trn2p", 9: "Trn2u", 10: "Trn2e", 11: "Trn2eu", 12: "Trn2ac",
                 13: "Trn2uac", 14: "Trn3", 15: "Trn3pds98"}
# nrt.h's NRT_INSTANCE_SIZE_* in enum order, as EC2 spells the size ("trn1.2xlarge")
INSTANCE_SIZES = ("xlarge", "2xlarge", "4xlarge", "6xlarge", "8xlarge", "24xlarge", "32xlarge", "48xlarge",
                  "3xlarge")


class NrtError(RuntimeError):
    def __init__(self, call: str, status: int) -> None:
        super().__init__(f"{call} failed: {STATUS_NAMES.get(status, 'status')}({status})")
        self.status = status


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_SIGNATURES = {
    # name: (restype, argtypes), from nrt.h / nrt_experimental.h
    "nrt_get_total_vnc_count": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint32)]),
    "nrt_get_visible_vnc_count": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint32)]),
    "nrt_get_instance_info": (ctypes.c_int, [ctypes.POINTER(NrtInstanceInfo), ctypes.c_size_t]),
    "nrt_init": (ctypes.c_int, [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p]),
    "nrt_close": (None, []),
    "nrt_load": (ctypes.c_int, [_P, ctypes.c_size_t, ctypes.c_int32, ctypes.c_int32, _PP]),
    "nrt_unload": (ctypes.c_int, [_P]),
    "nrt_get_model_tensor_info": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.POINTER(NrtTensorInfoArray))]),
    "nrt_free_model_tensor_info": (ctypes.c_int, [ctypes.POINTER(NrtTensorInfoArray)]),
    "nrt_tensor_allocate": (ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p, _PP]),
    "nrt_tensor_free": (None, [_PP]),
    "nrt_tensor_write": (ctypes.c_int, [_P, _P, ctypes.c_size_t, ctypes.c_size_t]),
    "nrt_tensor_read": (ctypes.c_int, [_P, _P, ctypes.c_size_t, ctypes.c_size_t]),
    "nrt_allocate_tensor_set": (ctypes.c_int, [_PP]),
    "nrt_destroy_tensor_set": (None, [_PP]),
    "nrt_add_tensor_to_tensor_set": (ctypes.c_int, [_P, ctypes.c_char_p, _P]),
    "nrt_execute": (ctypes.c_int, [_P, _P, _P]),
}


# what a runtime older than the nrt.h these bindings follow may lack; the rest it must have
_OPTIONAL = {"nrt_get_instance_info"}


def load_library(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)       # OSError: the caller says whose fault (detect: not set up; runner: broken)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name, None) if name in _OPTIONAL else getattr(lib, name)
        if fn is not None:
            fn.restype, fn.argtypes = restype, argtypes
    return lib


def visible_cores(path: str) -> int:
    """The (logical) NeuronCores this process's runtime may use: "VirtualNeuronCores visible to
    the application", what NEURON_RT_VISIBLE_CORES leaves of the instance's (nrt.h,
    nrt_get_visible_vnc_count; nrt_get_total_vnc_count counts the whole instance's). Callable
    before nrt_init, so counting takes no core."""
    lib = load_library(path)
    count = ctypes.c_uint32(0)
    status = lib.nrt_get_visible_vnc_count(ctypes.byref(count))
    if status != NRT_SUCCESS:
        raise NrtError("nrt_get_visible_vnc_count", status)
    return int(count.value)


def instance_family(path: str) -> str | None:
    """The instance's family as nrt.h names it ("Trn2", "Trn1", ...; nrt_get_instance_info), or
    None when the runtime does not say (an older libnrt, an unknown family)."""
    return instance(path)[0]


def instance(path: str) -> tuple[str | None, str | None]:
    """(family, size) of the instance as nrt_get_instance_info reports them ("Trn1", "2xlarge");
    each None when the runtime does not say (an older libnrt, a value nrt.h does not list)."""
    lib = load_library(path)
    info = NrtInstanceInfo()
    if not hasattr(lib, "nrt_get_instance_info") or lib.nrt_get_instance_info(ctypes.byref(info), ctypes.sizeof(info)) != NRT_SUCCESS:
        return None, None
    size = INSTANCE_SIZES[info.size] if info.size < len(INSTANCE_SIZES) else None
    return {**TRN1_FAMILIES, **TRN2_FAMILIES}.get(int(info.family)), size


def _check(call: str, status: int) -> None:
    if status != NRT_SUCCESS:
        from .faults import from_runtime
        raise from_runtime(call, status) or NrtError(call, status)


def _tensor_info(lib, model) -> list[dict]:
    info = ctypes.POINTER(NrtTensorInfoArray)()
    _check("nrt_get_model_tensor_info", lib.nrt_get_model_tensor_info(model, ctypes.byref(info)))
    try:
        count = info.contents.tensor_count
        base = ctypes.addressof(info.contents) + ctypes.sizeof(NrtTensorInfoArray)
        entries = (NrtTensorInfo * count).from_address(base)
        return [{"name": e.name.decode(), "usage": e.usage, "size": int(e.size), "dtype": e.dtype,
                 "shape": tuple(e.shape[i] for i in range(e.ndim))} for e in entries]
    finally:
        lib.nrt_free_model_tensor_info(info)


def run_once(path: str, neff: bytes, inputs: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """Load `neff` onto the first visible NeuronCore, execute it once on `inputs` (name ->
    array; the names must be the NEFF's), read every output back; then unload and close, so
    that the core is free for the next tool. Outputs in the NEFF's order, typed where libnrt
    reports a dtype NumPy knows, else raw bytes (uint8)."""
    try:
        lib = load_library(path)
    except OSError as err:
        from .faults import missing
        raise missing("the Neuron runtime library", path, err) from None
    _check("nrt_init", lib.nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, b"", b""))
    model, tensors, sets = _P(), [], []
    try:
        blob = ctypes.create_string_buffer(neff, len(neff))
        # vnc 0: the first core NEURON_RT_VISIBLE_CORES leaves this process; vnc_count: always -1
        _check("nrt_load", lib.nrt_load(blob, len(neff), 0, -1, ctypes.byref(model)))
        info = _tensor_info(lib, model)
        wanted = sorted(e["name"] for e in info if e["usage"] == NRT_TENSOR_USAGE_INPUT)
        if wanted != sorted(inputs):
            raise ValueError(f"the NEFF takes inputs {', '.join(wanted)}; the kernel's parameters are "
                             f"{', '.join(sorted(inputs))}")
        in_set, out_set = _P(), _P()
        for ts in (in_set, out_set):
            _check("nrt_allocate_tensor_set", lib.nrt_allocate_tensor_set(ctypes.byref(ts)))
            sets.append(ts)
        outputs = []
        for entry in info:
            tensor = _P()
            _check("nrt_tensor_allocate", lib.nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, entry["size"],
                                                                  entry["name"].encode(), ctypes.byref(tensor)))
            tensors.append(tensor)
            if entry["usage"] == NRT_TENSOR_USAGE_INPUT:
                data = np.ascontiguousarray(inputs[entry["name"]])
                if data.nbytes != entry["size"]:
                    raise ValueError(f"input {entry['name']} has {data.nbytes} bytes, the NEFF takes {entry['size']}")
                _check("nrt_tensor_write", lib.nrt_tensor_write(tensor, data.ctypes.data, 0, data.nbytes))
                target = in_set
            else:
                outputs.append((entry, tensor))
                target = out_set
            _check("nrt_add_tensor_to_tensor_set",
                   lib.nrt_add_tensor_to_tensor_set(target, entry["name"].encode(), tensor))
        _check("nrt_execute", lib.nrt_execute(model, in_set, out_set))
        results = []
        for entry, tensor in outputs:
            raw = np.empty(entry["size"], dtype=np.uint8)
            _check("nrt_tensor_read", lib.nrt_tensor_read(tensor, raw.ctypes.data, 0, entry["size"]))
            dtype = _dtypes().get(entry["dtype"])
            if dtype is not None and math.prod(entry["shape"]) * dtype.itemsize == entry["size"]:
                results.append((entry["name"], raw.view(dtype).reshape(entry["shape"])))
            else:
                results.append((entry["name"], raw))
        return results
    finally:
        for ts in sets:
            lib.nrt_destroy_tensor_set(ctypes.byref(ts))
        for tensor in tensors:
            lib.nrt_tensor_free(ctypes.byref(tensor))
        if model.value:
            lib.nrt_unload(model)
        lib.nrt_close()

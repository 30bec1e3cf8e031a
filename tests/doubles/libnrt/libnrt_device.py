"""The Python half of the libnrt double (fake_libnrt.c forwards every documented call here):
the runtime's state and its refusals, as nrt.h, nrt_experimental.h and nrt_status.h describe
them. Returns NRT_STATUS codes; handles are small integers the C side passes around as pointers.

Refused: any call before nrt_init or after nrt_close (NRT_UNINITIALIZED / NRT_CLOSED), unknown
handles (NRT_INVALID_HANDLE), a corrupt NEFF, a vnc that is not visible, input or output sets
whose names or sizes differ from the NEFF's, reads and writes out of a tensor's bounds
(NRT_INVALID)."""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import device_double  # noqa: E402

SUCCESS, FAILURE, INVALID, INVALID_HANDLE, UNINITIALIZED, CLOSED = 0, 1, 2, 3, 13, 14
USAGE_INPUT, USAGE_OUTPUT = 0, 1
NRT_DTYPES = {"float16": 0x7, "bfloat16": 0x6, "float32": 0xA, "uint8": 0x3, "uint16": 0x5, "uint32": 0x9,
              "uint64": 0x1, "int8": 0x2, "int16": 0x4, "int32": 0x8, "int64": 0xC}

state = {"phase": "new"}            # new -> open -> closed -> open ...
models: dict[int, device_double.Loaded] = {}
tensors: dict[int, bytearray] = {}
sets: dict[int, dict[str, int]] = {}
_next = [1]


def _handle() -> int:
    _next[0] += 1
    return _next[0] * 16            # aligned and never NULL, like a real pointer


def _cores() -> int:
    return int(os.environ.get("NRT_DOUBLE_CORES", "8"))


def _visible() -> int:
    """The cores NEURON_RT_VISIBLE_CORES names that the instance has (all of them without it)."""
    raw = os.environ.get("NEURON_RT_VISIBLE_CORES", "")
    if not raw:
        return _cores()
    named = set()
    for part in raw.split(","):
        lo, _, hi = part.partition("-")
        named.update(range(int(lo), int(hi or lo) + 1))
    return len([c for c in named if c < _cores()])


def _open() -> int:
    return SUCCESS if state["phase"] == "open" else (CLOSED if state["phase"] == "closed" else UNINITIALIZED)


def total_vnc_count() -> tuple[int, int]:
    return SUCCESS, _cores()


def visible_vnc_count() -> tuple[int, int]:
    """"VirtualNeuronCores visible to the application" (nrt.h): what NEURON_RT_VISIBLE_CORES
    leaves, callable before nrt_init like the total."""
    return SUCCESS, _visible()


def instance_info() -> tuple[int, int, int, str]:
    """(status, family, size, arch name): a trn2.48xlarge unless NRT_DOUBLE_FAMILY names another
    nrt.h NRT_INSTANCE_* family (2: Trn1, 14: Trn3) and NRT_DOUBLE_SIZE another NRT_INSTANCE_SIZE_*
    (1: 2xlarge, as trn1.2xlarge)."""
    family = device_double.family()
    arch = ("trn1" if family in device_double.TRN1_FAMILIES else
            "trn3" if family in device_double.TRN3_FAMILIES else "trn2")
    return SUCCESS, family, device_double.size(), arch


def init(framework: int) -> int:
    if state["phase"] == "open":
        return INVALID
    if framework not in (1, 2, 3, 4, 5):
        return INVALID
    state["phase"] = "open"
    return SUCCESS


def close() -> None:
    state["phase"] = "closed"
    models.clear()
    tensors.clear()
    sets.clear()


def load(neff: bytes, vnc: int, vnc_count: int) -> tuple[int, int]:
    if _open():
        return _open(), 0
    if vnc_count != -1 or not -1 <= vnc < _visible():
        return INVALID, 0
    try:
        loaded = device_double.Loaded(neff)
    except Exception:
        return INVALID, 0
    h = _handle()
    models[h] = loaded
    return SUCCESS, h


def unload(model: int) -> int:
    if _open():
        return _open()
    return SUCCESS if models.pop(model, None) is not None else INVALID_HANDLE


def tensor_info(model: int):
    if _open():
        return _open(), []
    loaded = models.get(model)
    if loaded is None:
        return INVALID_HANDLE, []
    info = [(e["name"], USAGE_INPUT, loaded.nbytes(e), NRT_DTYPES.get(e["dtype"], 0), list(e["shape"]))
            for e in loaded.inputs]
    info += [(e["name"], USAGE_OUTPUT, loaded.nbytes(e), NRT_DTYPES.get(e["dtype"], 0), list(e["shape"]))
             for e in loaded.outputs]
    return SUCCESS, info


def tensor_allocate(placement: int, vnc: int, size: int, name) -> tuple[int, int]:
    if _open():
        return _open(), 0
    if placement not in (0, 1, 2) or size <= 0 or (placement == 0 and not 0 <= vnc < _visible()):
        return INVALID, 0
    h = _handle()
    tensors[h] = bytearray(size)
    return SUCCESS, h


def tensor_free(tensor: int) -> None:
    tensors.pop(tensor, None)


def tensor_write(tensor: int, data: bytes, offset: int) -> int:
    if _open():
        return _open()
    buf = tensors.get(tensor)
    if buf is None:
        return INVALID_HANDLE
    if offset < 0 or offset + len(data) > len(buf):
        return INVALID
    buf[offset:offset + len(data)] = data
    return SUCCESS


def tensor_read(tensor: int, offset: int, size: int) -> tuple[int, bytes]:
    if _open():
        return _open(), b""
    buf = tensors.get(tensor)
    if buf is None:
        return INVALID_HANDLE, b""
    if offset < 0 or offset + size > len(buf):
        return INVALID, b""
    return SUCCESS, bytes(buf[offset:offset + size])


def set_allocate() -> tuple[int, int]:
    if _open():
        return _open(), 0
    h = _handle()
    sets[h] = {}
    return SUCCESS, h


def set_destroy(handle: int) -> None:
    sets.pop(handle, None)


def set_add(handle: int, name: str, tensor: int) -> int:
    if _open():
        return _open()
    if handle not in sets or tensor not in tensors:
        return INVALID_HANDLE
    sets[handle][name] = tensor
    return SUCCESS


def execute(model: int, in_set: int, out_set: int) -> int:
    if _open():
        return _open()
    loaded = models.get(model)
    if loaded is None or in_set not in sets or out_set not in sets:
        return INVALID_HANDLE
    ins, outs = sets[in_set], sets[out_set]
    # "input tensor name/size does not match the model" is NRT_INVALID (nrt_status.h)
    if set(ins) != {e["name"] for e in loaded.inputs} or set(outs) != {e["name"] for e in loaded.outputs}:
        return INVALID
    arrays = []
    for e in loaded.inputs:
        buf = tensors[ins[e["name"]]]
        if len(buf) != loaded.nbytes(e):
            return INVALID
        arrays.append(device_double.from_bytes_view(loaded, e["name"], bytes(buf)))
    for e in loaded.outputs:
        if len(tensors[outs[e["name"]]]) != loaded.nbytes(e):
            return INVALID
    results, _ = loaded.run(arrays)
    for e, value in zip(loaded.outputs, results):
        tensors[outs[e["name"]]][:] = np.ascontiguousarray(value).tobytes()
    return SUCCESS

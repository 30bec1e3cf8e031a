"""nl.shared_constant (NKI 0.6): a NumPy array embedded in the kernel's binary as a shared-HBM
tensor. In the program it is one record writing the whole tensor from its params (the values
travel with the program, as they travel with the NEFF), costing nothing at run time: the
runtime loads it with the binary."""
from __future__ import annotations

import os

import numpy as np

from .. import dtypes
from ..errors import ArgumentError, HardwareLimitError
from ..memory import Buffer
from ..registry import instruction
from ..running import current_machine
from ..trace import Engine

MAX_CONSTANT_BYTES = 64 << 20        # a bound on what one program carries (ProgramLimits.max_bytes is 1 GiB)


@instruction("shared_constant", Engine.DMA, kinds=("constant",))
def _embed(m, values: np.ndarray, tensor) -> None:
    # the bytes, with the dtype and shape they are (a program's arrays are index arrays or bytes)
    m.emit("shared_constant", Engine.DMA, "constant", [], [tensor],
           params={"bytes": values.reshape(-1).view(np.uint8), "dtype": dtypes.name_of(values.dtype),
                   "shape": list(values.shape)})


def shared_constant(constant, dtype=None):
    """The shared-HBM tensor holding `constant` (a NumPy array, or the path of a .npy file)."""
    m = current_machine()
    if isinstance(constant, (str, os.PathLike)):
        try:
            constant = np.load(constant, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise ArgumentError(f"nl.shared_constant could not read the .npy file {str(constant)!r}: {err}",
                                remedy="pass a NumPy array, or the path of a .npy file saved without pickles") from None
    if not isinstance(constant, np.ndarray) or constant.ndim == 0:
        raise ArgumentError(f"nl.shared_constant takes a NumPy array (or a .npy path), got {type(constant).__name__}",
                            code="err_unsupported_args")
    dt = dtypes.to_dtype(constant.dtype if dtype is None else dtype)
    if constant.nbytes > MAX_CONSTANT_BYTES:
        raise HardwareLimitError(f"nl.shared_constant of {constant.nbytes} bytes: nkisim embeds at most "
                                 f"{MAX_CONSTANT_BYTES} bytes of constants in one program",
                                 remedy="pass large data in as a kernel argument")
    tensor = m.allocate(tuple(int(n) for n in constant.shape), dt, Buffer.SHARED_HBM, name="constant")
    if m.core == 0:                      # a logical NeuronCore's cores share it: embedded once
        _embed(np.ascontiguousarray(constant.astype(dt)), tensor)
    return tensor


# ----- SDK 2.26's nl.shared_constant and nl.shared_identity_matrix ---------------------------------

def legacy_shared_constant(constant, dtype=None):
    """SDK 2.26's nl.shared_constant: "a tensor which contains the constant data" of a NumPy array
    (2.26 documents no .npy path). Its buffer is not stated for 2.26; nkisim gives the shared-HBM
    tensor the current reference documents, which a kernel loads like any HBM tensor."""
    if not isinstance(constant, np.ndarray):
        raise ArgumentError(f"nl.shared_constant takes a NumPy array, got {type(constant).__name__}",
                            remedy="pass the constant data as a NumPy array (a .npy path is NKI 0.6's form)",
                            code="err_unsupported_args")
    return shared_constant(constant, dtype)


def legacy_shared_identity_matrix(n, dtype=np.uint8):
    """SDK 2.26's nl.shared_identity_matrix: "the same behavior to nki.language.shared_constant"
    for an (n, n) identity, so the shared-HBM constant np.eye(n) in `dtype` (0.6 puts it in SBUF)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or int(n) < 1:
        raise ArgumentError(f"n of nl.shared_identity_matrix must be a positive int, got {n!r}",
                            remedy="pass the identity's size, e.g. n=128", code="err_unsupported_args")
    dt = dtypes.to_dtype(dtype)
    if int(n) ** 2 * dt.itemsize > MAX_CONSTANT_BYTES:
        raise HardwareLimitError(f"nl.shared_identity_matrix({int(n)}) of {dtypes.name_of(dt)} needs "
                                 f"{int(n) ** 2 * dt.itemsize} bytes: nkisim embeds at most "
                                 f"{MAX_CONSTANT_BYTES} bytes of constants in one program",
                                 remedy="use an identity of at most 128 x 128 (a tile's partitions)")
    return shared_constant(np.eye(int(n), dtype=np.uint8), dt)

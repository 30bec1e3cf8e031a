"""What the facade modules (nki, nki.language, nki.isa) answer for a name they do not define.

A documented NKI name that nkisim does not simulate gives a stand-in: importing or
referencing it is fine (the kernel may never call it), using it raises NotSimulatedError at
the kernel's line, saying the kernel may be valid NKI and what to do instead. Any other name
raises NoSuchNameError (an AttributeError) with the closest NKI names.
"""
from __future__ import annotations

import difflib
import types

from ..errors import NoSuchNameError, NotSimulatedError

_HARDWARE = "or have this kernel graded on Trainium hardware (the neuron backend)"

# nki.language names documented for SDK 2.26 (shared/docs/nki-api.md 1.2) that nkisim does
# not simulate, each with what a kernel can use instead.
LANGUAGE_NOT_SIMULATED = {
    "softmax": "compute it with nl.exp, a free-axis nl.sum and nl.divide (or nisa.activation and "
               "nisa.tensor_reduce)",
    "rms_norm": "compute it with nl.square, nl.mean along the free axis, nl.rsqrt and nl.multiply",
    "dropout": "dropout is random; a graded kernel should not need it",
    "gather_flattened": "gather with nisa.dma_copy from computed slices of the source",
    "all_reduce": "collectives need several NeuronCores; reduce within the kernel instead",
    "atomic_rmw": "accumulate with nisa.dma_copy(dst=..., src=..., dst_rmw_op=np.add)",
    "rand": "pass random data in as a kernel argument",
    "random_seed": "pass random data in as a kernel argument",
    "shared_constant": "pass the constant in as a kernel argument, or build it with nisa.iota / "
                       "nisa.memset",
    "shared_identity_matrix": "build the identity with nisa.iota and nisa.affine_select, or pass it "
                              "in as a kernel argument",
    "spmd_dim": "launch the kernel without an SPMD grid",
    "nc": "launch the kernel without an SPMD grid",
}

# nki.isa instructions documented for SDK 2.26 (nki-api.md 1.3, "Other nisa instructions")
ISA_NOT_SIMULATED = {
    "activation_reduce": "use nisa.activation followed by nisa.tensor_reduce",
    "tensor_scalar_reduce": "use nisa.tensor_scalar followed by nisa.tensor_reduce",
    "scalar_tensor_tensor": "use nisa.tensor_scalar followed by nisa.tensor_tensor",
    "tensor_tensor_scan": "write the scan as a loop of nisa.tensor_tensor over columns",
    "reciprocal": "use nisa.activation(op=nl.reciprocal, ...) or nl.reciprocal",
    "bn_stats": "compute mean and variance with nl.mean / nl.var along the free axis",
    "bn_aggr": "compute mean and variance with nl.mean / nl.var along the free axis",
    "dropout": "dropout is random; a graded kernel should not need it",
    "local_gather": "gather with nisa.dma_copy from computed slices of the source",
    "max8": "use nisa.tensor_reduce(nl.max, ...) for the largest value",
    "nc_find_index8": "not expressible with the simulated instructions",
    "nc_match_replace8": "not expressible with the simulated instructions",
    "nc_stream_shuffle": "move partitions with nisa.nc_transpose or a DMA",
    "range_select": "use nisa.affine_select or nl.where",
    "select_reduce": "use nl.where followed by nisa.tensor_reduce",
    "sequence_bounds": "not expressible with the simulated instructions",
    "tensor_copy_dynamic_src": "copy with a slice computed in Python from loop indices",
    "tensor_copy_dynamic_dst": "copy with a slice computed in Python from loop indices",
    "tensor_copy_predicated": "use nl.where, or nisa.tensor_copy with mask=",
}


class NotSimulated:
    """Stand-in for a documented NKI name nkisim does not simulate."""

    def __init__(self, qualname: str, alternative: str, simulated: str) -> None:
        self._qualname = qualname
        self._alternative = alternative
        self._simulated = simulated

    def _error(self) -> NotSimulatedError:
        return NotSimulatedError(
            f"{self._qualname} is documented NKI but nkisim does not simulate it, so this kernel "
            f"cannot run on the simulator as written (it may be valid on Trainium). "
            f"Simulated here: {self._simulated}",
            remedy=f"{self._alternative}; {_HARDWARE}")

    def __call__(self, *args, **kwargs):
        raise self._error()

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        raise self._error()

    def __repr__(self) -> str:
        return f"<{self._qualname}: documented NKI, not simulated by nkisim>"


def public_names(namespace: dict) -> list[str]:
    return sorted(n for n, v in namespace.items()
                  if not n.startswith("_") and not isinstance(v, types.ModuleType))


def make_getattr(prefix: str, namespace: dict, not_simulated: dict[str, str], simulated,
                 elsewhere=lambda: ()):
    """A module `__getattr__` for the facade module whose globals are `namespace`.
    `prefix` is how kernels spell the module ("nl."); `simulated()` describes what is
    simulated; `elsewhere()` gives (prefix, namespace) of the other facade modules, to say
    where a name from the wrong module lives."""
    stand_ins: dict[str, NotSimulated] = {}

    def __getattr__(name: str):
        if name.startswith("_"):
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        if name in not_simulated:
            if name not in stand_ins:
                stand_ins[name] = NotSimulated(prefix + name, not_simulated[name], simulated())
            return stand_ins[name]
        raise no_such_name(prefix, name, public_names(namespace) + list(not_simulated), elsewhere())
    return __getattr__


def no_such_name(prefix: str, name: str, known: list[str], elsewhere=()) -> NoSuchNameError:
    homes = [other + name for other, space in elsewhere if name in space and not name.startswith("_")]
    close = difflib.get_close_matches(name, known, n=4, cutoff=0.6)
    if homes:
        remedy = f"it is {' / '.join(homes)}: use that module"
    elif close:
        remedy = "did you mean " + ", ".join(prefix + c for c in close) + "?"
    else:
        remedy = f"check the spelling against the NKI documentation of {prefix.rstrip('.')}"
    return NoSuchNameError(f"{prefix}{name} is not an NKI name", remedy=remedy)

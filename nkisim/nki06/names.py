"""The current dialect's names that nkisim does not simulate yet, and the legacy names NKI 0.6
no longer has, each with its migration rule (nkisim.facade answers for both)."""
from __future__ import annotations

from ..dialects import REMOVED_MASK
from ..facade import make_getattr, public_names

# the migration rules of a legacy call, in the words both the simulator's errors and the grader's
# precheck use: 0.6's calling convention, and the keywords 0.6 removed
DESTINATION_FIRST = ("every nki.isa call takes its destination first and returns nothing, e.g. "
                     "nisa.nc_matmul(dst=psum, stationary=a, moving=b)")
REMOVED_KEYWORDS = {
    "mask": REMOVED_MASK,
    "dtype": "NKI 0.6 removed dtype= from nki.isa calls: the result takes the dtype of dst",
}

# nki.isa instructions of NKI 0.6 (the 0.6 API reference) not lowered onto the table yet
ISA_NOT_SIMULATED = {
    "local_gather": "gather within each partition with nisa.nc_n_gather, or across partitions with "
                    "nisa.dma_copy (local_gather is not simulated: the reference's prose does not say which "
                    "source elements each output partition receives; only an example shows the layout)",
}

# legacy nki.isa names that NKI 0.6 does not have
ISA_REMOVED = {
    "tensor_copy_dynamic_src": "it was removed in NKI 0.2; index with a physical access pattern (t.ap(...))",
    "tensor_copy_dynamic_dst": "it was removed in NKI 0.2; index with a physical access pattern (t.ap(...))",
    "unknown_engine": "NKI 0.3 names enums: use nisa.engine.unknown",
    "tensor_engine": "NKI 0.3 names enums: use nisa.engine.tensor",
    "vector_engine": "NKI 0.3 names enums: use nisa.engine.vector",
    "scalar_engine": "NKI 0.3 names enums: use nisa.engine.scalar",
    "gpsimd_engine": "NKI 0.3 names enums: use nisa.engine.gpsimd",
    "dma_engine": "NKI 0.3 names enums: use nisa.engine.sync or leave engine unset",
    "constants": "NKI 0.3 names enums on nki.isa itself: use nisa.engine",
}

# nki.language names NKI 0.6 does not simulate yet
LANGUAGE_NOT_SIMULATED = {
    "average": "the reference names the average op without documenting it: reduce with nl.add, then scale with "
               "nisa.tensor_scalar(op0=nl.multiply, operand0=1/n)",
    "gelu_apprx_sigmoid_dx": "the derivative of the sigmoid-approximated GELU has no documented formula nkisim "
                             "could follow: use nl.gelu_dx",
}

# legacy nki.language names that NKI 0.6 does not have
LANGUAGE_REMOVED = {
    "arange": "nl.arange was removed in NKI 0.2: index with plain integer slices, t[0:128, 0:512]",
    "mgrid": "nl.mgrid was removed in NKI 0.2: index with plain integer slices, t[0:128, 0:512]",
    "par_dim": "nl.par_dim was removed in NKI 0.2: the partition dimension is always the first; "
               "use a Python list of tiles, or fold the block into a free dimension",
    "loop_reduce": "nl.loop_reduce was removed: accumulate with nisa.tensor_tensor(dst=acc, data1=acc, "
                   "data2=tile, op=nl.add)",
    "spmd_dim": "SPMD grids became logical-NeuronCore launches: kernel[lnc](...)",
    "nc": "SPMD grids became logical-NeuronCore launches: kernel[lnc](...)",
}

# legacy top-level nki names that NKI 0.6 does not have
NKI_REMOVED = {
    "baremetal": "nki.baremetal is not available since NKI 0.2: call the @nki.jit kernel on NumPy arrays, "
                 "or nki.simulate(kernel)(...)",
    "benchmark": "nki.benchmark is not available since NKI 0.2: time a NEFF with nrtpy on Trainium, or "
                 "use `nkisim profile` for the simulated latency",
    "profile": "nki.profile is not available since NKI 0.2: capture with neuron-explorer on Trainium, or "
               "use `nkisim profile` for a simulated timeline",
    "simulate_kernel": "nki.simulate_kernel is not available since NKI 0.2: use nki.simulate(kernel)(...)",
    "tensor": "nki.tensor moved to nki.meta.tensor in NKI 0.2",
}


# prefix -> the namespace of the module kernels spell so: each module registers its own, so a
# name asked of the wrong one can say where it lives without this module importing them
NAMESPACES: dict[str, dict] = {}


def _others(prefix: str):
    return lambda: tuple((other, space) for other, space in NAMESPACES.items() if other != prefix)


def isa_getattr(namespace: dict):
    NAMESPACES["nisa."] = namespace
    return make_getattr("nisa.", namespace, ISA_NOT_SIMULATED, lambda: _simulated("nisa.", namespace),
                        elsewhere=_others("nisa."), removed=ISA_REMOVED)


def language_getattr(namespace: dict):
    NAMESPACES["nl."] = namespace
    return make_getattr("nl.", namespace, LANGUAGE_NOT_SIMULATED, lambda: _simulated("nl.", namespace),
                        elsewhere=_others("nl."), removed=LANGUAGE_REMOVED)


def nki_getattr(namespace: dict, submodules: list[str]):
    def simulated():
        return "nki.jit, nki.simulate and the modules " + ", ".join(f"nki.{m}" for m in submodules)
    return make_getattr("nki.", namespace, {}, simulated, removed=NKI_REMOVED)


def _simulated(prefix: str, namespace: dict) -> str:
    functions = [n for n in public_names(namespace)
                 if callable(namespace[n]) and not isinstance(namespace[n], type)]
    return prefix + (", " + prefix).join(functions)

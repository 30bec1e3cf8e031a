"""The `neuronxcc.nki` API, simulated. After `nkisim.install()`, `import neuronxcc.nki as nki`
gives this module."""
from ..errors import NotSimulatedError
from ..runtime import Kernel as _Kernel
from ..runtime import baremetal, benchmark, jit, simulate_kernel
from ..tensor import DeviceTensor as tensor
from . import compiler, isa, language, typing

__all__ = ["jit", "baremetal", "benchmark", "simulate_kernel", "profile", "compiler", "isa",
           "language", "typing", "tensor"]


def profile(func=None, **kwargs):
    raise NotSimulatedError(
        "nki.profile writes NEFF/NTFF files for neuron-profile, which need real hardware",
        remedy="use nki.benchmark for an estimated latency, or the `nkisim profile` command for an "
               "engine timeline")


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(f"module 'neuronxcc.nki' has no attribute '{name}'")
    from .names import no_such_name, public_names
    raise no_such_name("nki.", name, public_names(globals()) + ["language", "isa", "compiler", "typing"],
                       (("nl.", vars(language)), ("nisa.", vars(isa))))


del _Kernel

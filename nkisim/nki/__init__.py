"""The `neuronxcc.nki` API, simulated. After `nkisim.install()`, `import neuronxcc.nki as nki`
gives this module."""
import os

from ..errors import ArgumentError, KernelContractError
from ..runtime import Kernel as _Kernel
from ..runtime import _decorator_or_call
from ..runtime import as_kernel as _as_kernel
from ..runtime import run_kernel as _run_kernel
from ..runtime import baremetal, benchmark, jit, simulate_kernel
from ..tensor import DeviceTensor as tensor
from . import compiler, isa, language, typing

__all__ = ["jit", "baremetal", "benchmark", "simulate_kernel", "profile", "compiler", "isa",
           "language", "typing", "tensor"]


# nki.profile's documented keywords (2.26: neuronxcc.nki.profile) and their defaults
_PROFILE_DEFAULTS = {"working_directory": None, "save_neff_name": "file.neff", "save_trace_name": "profile.ntff",
                     "additional_compile_opt": None, "overwrite": False, "profile_nth": 1}


def profile(func=None, **kwargs):
    """nki.profile: decorates a kernel; calling it runs the kernel on the simulator and writes,
    in `working_directory`, the profile nkisim can make where the hardware's is asked for: the
    JSON summary and SVG engine timeline `nkisim profile` writes (the cost model's estimate of
    neuron-profile's total time), named after save_trace_name (profile.ntff -> profile.json,
    profile.svg). The NEFF and the NTFF themselves need the compiler and a NeuronCore: nothing
    is written under save_neff_name. Every execution is the same here, so profile_nth changes
    nothing. Returns the kernel's outputs, as nki.benchmark's simulation does."""
    options = _profile_options(kwargs)
    return _decorator_or_call(func, lambda k: _ProfiledKernel(_as_kernel(k), options))


def _profile_options(kwargs: dict) -> dict:
    unknown = sorted(set(kwargs) - set(_PROFILE_DEFAULTS))
    if unknown:
        raise ArgumentError(f"nki.profile got unexpected keyword(s) {', '.join(unknown)}",
                            remedy=f"nki.profile takes {', '.join(_PROFILE_DEFAULTS)}")
    options = {**_PROFILE_DEFAULTS, **kwargs}
    where = options["working_directory"]
    if not isinstance(where, str) or not os.path.isabs(where):
        raise ArgumentError(f"nki.profile needs working_directory, an absolute path, got {where!r}",
                            remedy="pass working_directory='/abs/path/for/profiles'")
    for name in ("save_neff_name", "save_trace_name"):
        value = options[name]
        if not isinstance(value, str) or not value or os.path.basename(value) != value or value in (".", ".."):
            raise ArgumentError(f"nki.profile's {name} must be a file name, got {value!r}",
                                remedy="give a name such as 'profile.ntff'; the directory is working_directory")
    nth = options["profile_nth"]
    if type(nth) is not int or nth < 1:
        raise ArgumentError(f"nki.profile's profile_nth must be a whole number of at least 1, got {nth!r}")
    if options["additional_compile_opt"] is not None and not isinstance(options["additional_compile_opt"], str):
        raise ArgumentError("nki.profile's additional_compile_opt must be a string of compiler flags")
    if not isinstance(options["overwrite"], bool):
        raise ArgumentError(f"nki.profile's overwrite must be True or False, got {options['overwrite']!r}")
    return options


class _ProfiledKernel:
    """What nki.profile returns: call it (or `[grid]` it, then call) on NumPy arrays."""

    def __init__(self, kernel, options: dict) -> None:
        self.kernel = kernel
        self.options = options
        self.__name__ = kernel.__name__
        self.__doc__ = kernel.__doc__

    def __getitem__(self, grid):
        return _ProfiledKernel(self.kernel[grid], self.options)

    def __call__(self, *args, **kwargs):
        from ..cost import estimate
        from ..cost.profile import build_profile, timeline_svg, verdict, write_json
        opts = self.options
        stem = os.path.splitext(opts["save_trace_name"])[0] or opts["save_trace_name"]
        paths = [os.path.join(opts["working_directory"], stem + ext) for ext in (".json", ".svg")]
        if not opts["overwrite"] and any(os.path.exists(p) for p in paths):
            raise KernelContractError(f"nki.profile: {' or '.join(p for p in paths if os.path.exists(p))} "
                                      "already exists", remedy="pass overwrite=True, or another save_trace_name")
        compile_options = {"additional_compile_opt": opts["additional_compile_opt"]} \
            if opts["additional_compile_opt"] else {}
        run = _run_kernel(self.kernel, args, kwargs, compile_options=compile_options)
        timeline = estimate(run, measurement="profile")      # neuron-profile's total time
        prof = build_profile(run.trace, timeline)
        os.makedirs(opts["working_directory"], exist_ok=True)
        write_json(prof, paths[0])
        with open(paths[1], "w") as fh:
            fh.write(timeline_svg(run.trace, timeline, title=self.__name__, verdict=verdict(prof)))
        return run.outputs


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(f"module 'neuronxcc.nki' has no attribute '{name}'")
    from .names import no_such_name
    raise no_such_name("nki.", name, list(__all__),
                       (("nl.", vars(language)), ("nisa.", vars(isa))))


del _Kernel

"""Contract double of `neuronxcc.nki` (SDK 2.26, NKI beta). The kernel language is nkisim's;
the entry points are as strict as their documentation (nki/api/generated/nki.baremetal,
nki.benchmark, nki.jit):

    baremetal(kernel=None, **kwargs): save_neff_name, save_trace_name, additional_compile_opt
    benchmark(kernel=None, **kwargs): warmup, iters, save_neff_name, save_trace_name,
                                      additional_compile_opt

Any other keyword (artifacts_dir=, ...) is a TypeError, and the decorated function takes NumPy
arrays only. baremetal compiles and runs on the device, so it returns the real outputs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

import compile_double  # noqa: E402
from nkisim.nki import compiler, isa, language, typing  # noqa: E402,F401
from nkisim.runtime import jit  # noqa: E402,F401

sys.modules[__name__ + ".language"] = language
sys.modules[__name__ + ".isa"] = isa
sys.modules[__name__ + ".compiler"] = compiler
sys.modules[__name__ + ".typing"] = typing

_BAREMETAL = {"save_neff_name", "save_trace_name", "additional_compile_opt"}
_BENCHMARK = _BAREMETAL | {"warmup", "iters"}


def _refuse_unknown(kwargs: dict, allowed: set, who: str) -> None:
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise TypeError(f"{who}() got unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"documented: {', '.join(sorted(allowed))}")


def baremetal(kernel=None, **kwargs):
    _refuse_unknown(kwargs, _BAREMETAL, "nki.baremetal")
    if kwargs.get("save_trace_name") and kwargs.get("save_neff_name") not in (None, "file.neff"):
        raise ValueError("known issue: with save_trace_name, save_neff_name must be 'file.neff'")

    def make(k):
        def run(*args, **kw):
            compile_double.check_arrays(args, kw, "nki.baremetal")
            options = {"additional_compile_opt": kwargs["additional_compile_opt"]} \
                if kwargs.get("additional_compile_opt") else {}
            return compile_double.compile_and_run(k, args, kw, kwargs.get("save_neff_name"), options)
        return run
    return make if kernel is None else make(kernel)


def benchmark(kernel=None, **kwargs):
    _refuse_unknown(kwargs, _BENCHMARK, "nki.benchmark")
    raise NotImplementedError("the grader never runs nki.benchmark: it runs neuron-bench, which has no "
                              "documented command line")

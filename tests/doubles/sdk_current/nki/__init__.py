"""Contract double of the standalone `nki` wheel (NKI 0.2+, SDK 2.28+). The kernel language is
nkisim's; the surface is what the current line documents:

- NKI_ARTIFACTS_DIR is read when nki is imported ("must be set before importing nki. The
  compile options are resolved at import time": nrtpy tutorial "debug a NEFF");
- a @nki.jit kernel called on NumPy arrays compiles and runs on the device, keeping
  NKI_ARTIFACTS_DIR/kernel.neff;
- nki.baremetal, nki.benchmark and nki.simulate_kernel are gone (NKI 0.2.0): AttributeError.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import compile_double  # noqa: E402
from nkisim.nki import compiler, isa, language, typing  # noqa: E402,F401
from nkisim.runtime import Kernel  # noqa: E402

sys.modules[__name__ + ".language"] = language
sys.modules[__name__ + ".isa"] = isa
sys.modules[__name__ + ".compiler"] = compiler
sys.modules[__name__ + ".typing"] = typing

__version__ = "0.4.0"
_ARTIFACTS = os.environ.get("NKI_ARTIFACTS_DIR")     # resolved once, at import


class _Jit(Kernel):
    """A kernel (nkisim's, so compiler directives such as skip_middle_end_transformations keep
    it) whose call on NumPy arrays compiles, keeps the NEFF and runs."""

    def __call__(self, *args, **kwargs):
        from nkisim.running import RUNNING
        if RUNNING.get() is not None:           # a helper call inside a running kernel
            return self.func(*args, **kwargs)
        compile_double.check_arrays(args, kwargs, "an nki.jit kernel")
        neff = None
        if _ARTIFACTS:
            os.makedirs(_ARTIFACTS, exist_ok=True)
            neff = os.path.join(_ARTIFACTS, "kernel.neff")
        return compile_double.compile_and_run(self.func, args, kwargs, neff, {})


def jit(func=None, **options):
    return (lambda f: _Jit(f, **options)) if func is None else _Jit(func, **options)



def __getattr__(name):
    if name in ("baremetal", "benchmark", "simulate_kernel", "profile"):
        raise AttributeError(f"nki.{name} is not available from NKI 0.2.0: call the @nki.jit kernel on NumPy "
                             f"arrays, with NKI_ARTIFACTS_DIR set before importing nki to keep the NEFF")
    raise AttributeError(f"module 'nki' has no attribute {name!r}")

"""Contract double of the standalone `nki` wheel as the current line ships it (NKI 0.6, Neuron
SDK 2.32). The kernel language is nkisim's NKI 0.6 front end (nkisim.nki06), so its rules hold
here as on the real wheel: destination-first nki.isa calls, outputs in nl.shared_hbm, no
legacy `neuronxcc.nki` inside a kernel. The surface is what the current line documents:

- NKI_ARTIFACTS_DIR is read when nki is imported ("must be set before importing nki. The
  compile options are resolved at import time": nrtpy tutorial "debug a NEFF");
- a @nki.jit kernel called on NumPy arrays compiles and runs on the device, keeping
  NKI_ARTIFACTS_DIR/kernel.neff; the platform comes from NEURON_PLATFORM_TARGET_OVERRIDE;
- it compiles at kernel[lnc](...)'s degree, else NEURON_LOGICAL_NC_CONFIG's, else LNC=1, and runs
  only when that is the runtime's degree (NEURON_LOGICAL_NC_CONFIG, else Trn2's default, 2):
  a plain kernel(...) on a default Trn2 is the documented runtime error;
- its top level is what NKI 0.6 documents (nki/api/nki.rst: jit and simulate, with the modules
  isa, language, typing): any other name, such as nki.compiler (the legacy
  nki.compiler.skip_middle_end_transformations), is an AttributeError, as on the real module;
- nki.simulate(kernel)(...) runs it on the CPU (here: nkisim), with no NEFF;
- nki.baremetal, nki.benchmark, nki.simulate_kernel and nki.profile are gone (NKI 0.2.0).
"""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import compile_double  # noqa: E402
import device_double  # noqa: E402
from nkisim import nki06 as _nki06  # noqa: E402
from nkisim.nki06 import isa, language, rules as _rules, typing  # noqa: E402,F401
from nkisim.nki06.kernel import CurrentKernel, settings_from_environment  # noqa: E402
from nkisim.nki06.kernel import jit as _nki06_jit, simulate as _nki06_simulate  # noqa: E402

sys.modules[__name__ + ".language"] = language
sys.modules[__name__ + ".isa"] = isa
sys.modules[__name__ + ".typing"] = typing

__version__ = "0.6.0"
_ARTIFACTS = os.environ.get("NKI_ARTIFACTS_DIR")     # resolved once, at import


class _Jit(CurrentKernel):
    """NKI 0.6's kernel (nkisim's, so every 0.6 rule still applies) whose call on NumPy arrays
    compiles, keeps the NEFF and runs on the device."""

    _bracket = None              # the degree kernel[lnc](...) launched it at, if it did

    def __getitem__(self, lnc):
        launched = super().__getitem__(lnc)
        launched = copy.copy(launched) if launched is self else launched
        launched._bracket = lnc
        return launched

    def _degree(self) -> int:
        """The logical-NeuronCore degree this call compiles for. "The LNC (Logical NeuronCore)
        degree can be set at the callsite using bracket syntax: kernel[lnc](args). The default
        is LNC=1" (nki.jit, SDK 2.31); "Configure the LNC degree by setting the
        NEURON_LOGICAL_NC_CONFIG environment variable ... If the LNC degree is not explicitly
        set, the default is LNC=1" (nki.jit, SDK 2.33); a launch grid that differs from the
        degree in use is a compile-time error (announce-intent-eos-nki-spmd-launch-grid,
        compiler error EVRF066)."""
        raw = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "")
        if self._bracket is not None and raw and str(self._bracket) != raw:
            raise RuntimeError(f"NKI kernel '{self.__name__}' is configured with LNC={self._bracket}, but "
                               f"NEURON_LOGICAL_NC_CONFIG={raw} (EVRF066)")
        if self._bracket is not None:
            return self._bracket
        return int(raw) if raw in ("1", "2") else 1

    def __call__(self, *args, **kwargs):
        from nkisim.running import RUNNING
        if RUNNING.get() is not None:            # a decorated helper: NKI 0.6 refuses it
            return super().__call__(*args, **kwargs)
        _rules.arrays_only(args)
        compile_double.check_arrays(args, kwargs, "an nki.jit kernel")
        lnc = self._degree()
        kernel = self if lnc == self.lnc else CurrentKernel.__getitem__(self, lnc)

        def load(program) -> None:
            # compiled, it runs on the device at once, at the runtime's degree: "The LNC value
            # must match the NEURON_LOGICAL_NC_CONFIG environment variable set for the Neuron
            # Runtime. Mismatching the two will cause a runtime error" (nki.jit, SDK 2.31)
            runtime = device_double.runtime_lnc()
            if program.lnc != runtime:
                raise RuntimeError(f"NKI kernel '{self.__name__}' was compiled for LNC={program.lnc} and the Neuron "
                                   f"runtime runs at LNC={runtime}: the kernel's LNC must match "
                                   f"NEURON_LOGICAL_NC_CONFIG (unset: the platform's default, 2 on Trn2)")
        neff = None
        if _ARTIFACTS:
            os.makedirs(_ARTIFACTS, exist_ok=True)
            neff = os.path.join(_ARTIFACTS, "kernel.neff")
        return compile_double.compile_and_run(kernel, args, kwargs, neff, {}, settings_from_environment(), load)


def jit(func=None, **options):
    """@nki.jit: nkisim.nki06's refusals (options, platform_target=, decorated twice), this double's kernel."""
    checked = _nki06_jit(**options)

    def make(f):
        return _Jit(checked(f).func)
    return make if func is None else make(func)


def simulate(kernel):
    """nki.simulate(kernel)(*arrays): on the CPU, so no NEFF is compiled or kept."""
    kernel = _nki06_simulate(kernel)
    return lambda *args, **kwargs: CurrentKernel.__call__(kernel, *args, **kwargs)


_REMOVED = ("baremetal", "benchmark", "simulate_kernel", "profile")


def __getattr__(name):
    if name in _REMOVED:
        raise AttributeError(f"nki.{name} is not available from NKI 0.2.0: call the @nki.jit kernel on NumPy "
                             f"arrays, with NKI_ARTIFACTS_DIR set before importing nki to keep the NEFF")
    return _nki06.__getattr__(name)             # NKI 0.6's own answer: a removed name's migration rule, or none

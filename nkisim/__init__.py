"""nkisim: run NKI kernels on NumPy, with the hardware limits the compiler enforces.

    import nkisim
    nkisim.install()                 # `import neuronxcc.nki` now resolves to nkisim
    import neuronxcc.nki as nki
    out = nki.baremetal(kernel)(x, y)
"""
from .errors import NKISimError, RealNeuronxccPresentError
from .install import install, installed, real_neuronxcc_available, uninstall
from .machine import Machine
from .runtime import KernelRun, run_kernel
from .settings import HardwareLimits, SimSettings

__all__ = ["install", "uninstall", "installed", "real_neuronxcc_available", "run_kernel", "KernelRun",
           "Machine", "SimSettings", "HardwareLimits", "NKISimError", "RealNeuronxccPresentError"]

"""The `nki` package of NKI 0.6 (Neuron SDK 2.32), simulated. After `nkisim.install()`,
`import nki`, `import nki.isa as nisa` and `import nki.language as nl` give these modules.

Its top level is what 0.6 documents there: `nki.jit` and `nki.simulate`."""
from . import isa, language, typing
from .kernel import jit, simulate
from . import names as _names

__all__ = ["jit", "simulate", "isa", "language", "typing"]
__version__ = "0.6.0"

__getattr__ = _names.nki_getattr(globals(), ["isa", "language", "typing"])

"""Make `import neuronxcc.nki` (the legacy dialect) and `import nki` (NKI 0.6) resolve to nkisim
in this process, so student files run unmodified."""
from __future__ import annotations

import importlib.util
import sys
import types

from .errors import RealNeuronxccPresentError

_MODULES = ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa",
            "neuronxcc.nki.isa.constants", "neuronxcc.nki.compiler", "neuronxcc.nki.typing",
            "nki", "nki.language", "nki.isa", "nki.typing")
_saved: dict[str, types.ModuleType | None] = {}

# modules of the two packages that NKI documents and nkisim does not simulate: why, and what to do
_NOT_SIMULATED_MODULES = {
    "nki.collectives": "collectives run across NeuronCores of several devices, which nkisim does not simulate "
                       "(AWS's nki.simulate does not either); on one logical NeuronCore exchange tiles with "
                       "nisa.sendrecv and synchronise with nisa.core_barrier",
    "nki.meta": "nki.meta is not documented for NKI 0.6 beyond holding nki.meta.tensor; annotate with nki.typing",
}


class _FacadeFinder:
    """The import of a submodule of `neuronxcc`/`nki` that is not one of the dialects' modules:
    refused with what NKI has (nkisim's own modules behind the facade are not NKI's)."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top not in ("neuronxcc", "nki") or fullname in _MODULES or not installed():
            return None
        why = _NOT_SIMULATED_MODULES.get(fullname)
        if why is None:
            known = ", ".join(m for m in _MODULES if m.split(".")[0] == top)
            why = f"it is not a module of NKI; the modules are {known}"
        raise ModuleNotFoundError(f"No module named {fullname!r} in nkisim's NKI: {why}", name=fullname)


_FINDER = _FacadeFinder()


def installed() -> bool:
    return getattr(sys.modules.get("neuronxcc"), "__nkisim__", False)


def real_neuronxcc_available() -> bool:
    """True when a real neuronx-cc with an `nki` package, or the real NKI 0.6 `nki` package, is
    importable (the PyPI placeholders have neither)."""
    if installed():
        return False
    return _importable("neuronxcc", "neuronxcc.nki") or _importable("nki", "nki.isa")


def _which_real() -> str:
    return "neuronx-cc" if _importable("neuronxcc", "neuronxcc.nki") else "nki package (NKI 0.6)"


def _importable(package: str, module: str) -> bool:
    """`module` can be imported here (the real SDK's; NKI 0.6's `nki` package has `nki.isa`)."""
    try:
        return importlib.util.find_spec(package) is not None and importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install(force: bool = False, platform: str | None = None) -> None:
    """`platform` ("trn2" or "trn1") makes that platform's NKI rules the default of every run
    in this process and gives kernel files its SDK's host-side names (logging.OFF on trn1).
    Call it before importing the kernel file."""
    if platform is not None:
        from .platforms import set_default_platform
        set_default_platform(platform)
    if installed():
        return
    if real_neuronxcc_available() and not force:
        raise RealNeuronxccPresentError(
            f"the real {_which_real()} is installed in this environment; nkisim.install() will not "
            "shadow it. Use the real compiler on Trainium, or call nkisim.install(force=True) to simulate anyway.")
    from . import nki
    from .nki import compiler, isa, language, typing
    root = types.ModuleType("neuronxcc", "nkisim's stand-in for neuronx-cc")
    root.__nkisim__ = True
    root.__path__ = []
    constants = types.ModuleType("neuronxcc.nki.isa.constants")
    constants.engine = isa.engine
    isa.constants = constants
    from . import nki06
    from .facade import api_view
    root.nki = legacy = api_view(nki, nki.__all__)
    legacy.compiler = compiler.API
    mapping = {"neuronxcc": root, "neuronxcc.nki": legacy, "neuronxcc.nki.language": language,
               "neuronxcc.nki.isa": isa, "neuronxcc.nki.isa.constants": constants,
               "neuronxcc.nki.compiler": compiler.API, "neuronxcc.nki.typing": typing,
               # the current dialect (NKI 0.6): the standalone `nki` package
               "nki": api_view(nki06, nki06.__all__), "nki.language": nki06.language, "nki.isa": nki06.isa,
               "nki.typing": nki06.typing}
    for name, module in mapping.items():
        _saved.setdefault(name, sys.modules.get(name))
        sys.modules[name] = module
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    from .platforms import reset
    reset()
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in _MODULES:
        previous = _saved.pop(name, None)
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous

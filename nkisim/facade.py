"""What a front end's modules (nki, nki.language, nki.isa of either dialect) answer for a name
they do not define.

A documented NKI name that nkisim does not simulate gives a stand-in: importing or
referencing it is fine (the kernel may never call it), using it raises NotSimulatedError at
the kernel's line, saying the kernel may be valid NKI and what to do instead. Any other name
raises NoSuchNameError (an AttributeError) with the closest NKI names.
"""
from __future__ import annotations

import difflib
import types

from .errors import NoSuchNameError, NotSimulatedError

HARDWARE = "or have this kernel graded on Trainium hardware (the neuron backend)"


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
            remedy=f"{self._alternative}; {HARDWARE}")

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
                 elsewhere=lambda: (), removed: dict[str, str] | None = None):
    """A module `__getattr__` for the facade module whose globals are `namespace`.
    `prefix` is how kernels spell the module ("nl."); `simulated()` describes what is
    simulated; `elsewhere()` gives (prefix, namespace) of the other facade modules, to say
    where a name from the wrong module lives; `removed` maps names an earlier NKI had to the
    migration rule that replaced them."""
    stand_ins: dict[str, NotSimulated] = {}
    removed = removed or {}

    def __getattr__(name: str):
        if name.startswith("_"):
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        if name in removed:
            raise NoSuchNameError(f"{prefix}{name} is not in this NKI version: {removed[name]}",
                                  remedy="see the NKI migration guide for the replacement",
                                  code="err_removed_nki_name")
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


def api_view(module: types.ModuleType, names, getattr_=None) -> types.ModuleType:
    """The module a kernel imports in place of `module`: the names NKI documents there and
    nothing else, so what nkisim's module holds for itself (its imports, its exception classes,
    the submodules of a package) is not reachable as an NKI name: `nki.os` is the error it is on
    the real package. Any other name gets `getattr_`'s answer (by default `module`'s own
    __getattr__, which sees that the name is not NKI's). Named as `module` is, since the
    dialect of what a kernel imported is read from module names."""
    view = types.ModuleType(module.__name__, module.__doc__)
    view.__dict__.update({name: getattr(module, name) for name in names})
    for dunder in ("__file__", "__version__", "__all__"):
        if hasattr(module, dunder):
            setattr(view, dunder, getattr(module, dunder))
    if hasattr(module, "__path__"):
        view.__path__ = []                       # a package: `import nki.isa` finds its submodules
    answer = getattr_ or vars(module).get("__getattr__")
    if answer is not None:
        view.__getattr__ = answer
    return view

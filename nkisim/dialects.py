"""The two NKI dialects nkisim simulates, named once: a spec names one, a report says which one
a kernel was checked against, and the precheck knows each dialect's modules by it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    name: str              # what a spec's `dialect` says
    package: str           # what a kernel file imports
    modules: tuple[str, ...]   # the dialect's importable modules
    facade: str            # nkisim's package that stands in for `package`
    title: str             # how a report names it
    sdk: str               # the Neuron SDK line that ships it
    # what never-written integer memory holds when a program of the dialect runs: a value
    # (nki.simulate's documented sentinel), or None for a recognisable byte pattern
    uninitialized_int: int | None = None

    @property
    def label(self) -> str:
        """Its title and SDK line, as reports and errors name it."""
        return f"{self.title} on {self.sdk}"

    def facade_of(self, module: str) -> str:
        """nkisim's module that stands in for one of this dialect's ("nki.isa" -> "nkisim.nki06.isa")."""
        return self.facade + module[len(self.package):]


LEGACY = Dialect(
    name="neuronxcc-nki", package="neuronxcc.nki",
    modules=("neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.isa.constants",
             "neuronxcc.nki.compiler", "neuronxcc.nki.typing"),
    facade="nkisim.nki", title="legacy NKI (neuronxcc.nki, NKI 0.1)", sdk="Neuron SDK 2.26")
CURRENT = Dialect(
    name="nki-0.6", package="nki",
    modules=("nki", "nki.language", "nki.isa", "nki.typing"),
    facade="nkisim.nki06", title="NKI 0.6 (nki)", sdk="Neuron SDK 2.32",
    # nki.simulate: "every new allocation is filled with NaN for floating types and 4 for integer types"
    uninitialized_int=4)

DIALECTS = {d.name: d for d in (LEGACY, CURRENT)}

# NKI 0.6's rule for a mask= argument, in the words every refusal of one uses
REMOVED_MASK = "NKI 0.6 removed mask=: slice the operands to the valid region instead (bounds with min())"


def dialect_named(name: str | None) -> Dialect:
    """The dialect a spec names (None: the legacy one, what specs before the current line mean)."""
    if name is None:
        return LEGACY
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown NKI dialect {name!r}: nkisim knows "
                         f"{', '.join(repr(n) for n in DIALECTS)}") from None


def dialect_of_module(module: str) -> Dialect | None:
    """The dialect whose package `module` belongs to ("nki.isa" -> CURRENT), else None."""
    return next((d for d in DIALECTS.values() if _within(module, d.package)), None)


def api_module_of(facade_module: str) -> str | None:
    """The NKI module one of nkisim's facade modules stands in for ("nkisim.nki06.isa" -> "nki.isa"),
    or None for any other module."""
    d = next((d for d in DIALECTS.values() if _within(facade_module, d.facade)), None)
    return d.package + facade_module[len(d.facade):] if d is not None else None


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")

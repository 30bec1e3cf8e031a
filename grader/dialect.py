"""Which NKI dialect a kernel is in, and what a kernel in the wrong one for its assignment is
told: the precheck's one error (grader.precheck.migration finds the file's first migration rule)
and the sandboxed child's refusal (grader.child, when the precheck is off) say it in the same
words. The dialects themselves (names, packages, titles, SDKs) are nkisim.dialects'.

Imported by the sandboxed child: it must stay light (nkisim.dialects and nothing of grading)."""
from __future__ import annotations

from nkisim.dialects import CURRENT, DIALECTS, LEGACY, Dialect, api_module_of, dialect_named, dialect_of_module

__all__ = ["CURRENT", "LEGACY", "Dialect", "DialectError", "dialect_named", "dialect_of_import",
           "dialect_of_loaded", "file_message", "kernel_message"]

# The 0.4 compiler's rule, as nkisim.nki06.rules words it for a kernel whose module uses both
MIXED_RULE = ("since NKI 0.4 (Neuron SDK 2.30) using neuronxcc.nki inside an NKI kernel is a "
              "compilation error")


class DialectError(Exception):
    """A kernel in another NKI dialect than its assignment's (raised in the sandboxed child)."""


def dialect_of_import(module: str) -> Dialect | None:
    """The dialect an imported module belongs to: its package or below ("nki.isa"), or a parent
    of its package (`import neuronxcc`, whose `nki` is the legacy package)."""
    found = dialect_of_module(module)
    if found is not None:
        return found
    return next((d for d in DIALECTS.values() if d.package.startswith(module + ".")), None)


def dialect_of_loaded(name: str) -> Dialect | None:
    """The dialect a loaded module (by its __name__) belongs to: the real SDK's package, or
    nkisim's facade that stands in for it ("nkisim.nki06.isa" -> NKI 0.6)."""
    return dialect_of_module(api_module_of(name) or name)


def _age(d: Dialect) -> str:
    return "the legacy dialect" if d is LEGACY else "the current dialect"


def _imports(d: Dialect) -> str:
    alias = "" if d.package == "nki" else " as nki"
    return f"import {d.package}{alias}, {d.package}.language as nl and {d.package}.isa as nisa"


def _assignment(expected: Dialect) -> str:
    return f"this assignment is written in {expected.label} (import {expected.package})"


def _first_rule(rule: tuple[int, str] | None) -> str:
    return f"; line {rule[0]} breaks the first rule: {rule[1]}" if rule else ""


def file_message(expected: Dialect, found: Dialect, mixed: bool, rule: tuple[int, str] | None) -> str:
    """The one error of a kernel file that imports `found`'s package under an assignment in
    `expected` (`mixed`: it imports `expected`'s package too). `rule`: (line, rule) of the first
    place the file breaks `expected`'s rules, or None."""
    if mixed and expected is CURRENT:         # what the 0.4+ compiler refuses
        return (f"this file imports both {CURRENT.package} and {LEGACY.package}: {MIXED_RULE}, and "
                f"{_assignment(expected)}. Delete the {LEGACY.package} imports and write what used them in "
                f"{CURRENT.title}{_first_rule(rule)}.")
    missing = f", which {expected.sdk} does not have" if found is CURRENT else ""
    if mixed:
        return (f"{_assignment(expected)}; this file also imports {found.package}, {_age(found)}: "
                f"{found.label}{missing}. Delete the {found.package} imports and write what used them in "
                f"{_age(expected)}{_first_rule(rule)}.")
    return (f"{_assignment(expected)}; this file imports {found.package}, {_age(found)}: {found.label}"
            f"{missing}. Migrate it: {_imports(expected)} instead{_first_rule(rule)}.")


def kernel_message(expected: Dialect, kernel: str, found: Dialect | None, module_uses: Dialect | None) -> str:
    """Why the child refuses `kernel`: it is a kernel of `found` (None: not an @nki.jit kernel
    at all), or its module uses `module_uses`' package, under an assignment in `expected`."""
    if found is None:
        return (f"{_assignment(expected)}; {kernel} is not an @nki.jit kernel, and {expected.title} compiles "
                f"only those. Decorate it with @nki.jit ({_imports(expected)}).")
    if found is not expected:
        return (f"{_assignment(expected)}; {kernel} is a kernel of {_age(found)}: {found.label}. "
                f"Migrate it: {_imports(expected)} instead.")
    if expected is CURRENT:
        return (f"{kernel}'s file uses {LEGACY.package}: {MIXED_RULE}, and {_assignment(expected)}. "
                f"Delete the {LEGACY.package} imports and write what used them in {CURRENT.title}.")
    return (f"{_assignment(expected)}; {kernel}'s file also uses {module_uses.package}, {_age(module_uses)}. "
            f"Delete the {module_uses.package} imports and write what used them in {_age(expected)}.")

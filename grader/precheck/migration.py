"""The first place a kernel file breaks the rules of its assignment's NKI dialect, for the one
error a file in the other dialect gets: the migration rule to fix first, at its line.

Legacy to NKI 0.6, in the words of the NKI migration guide (shared/docs/nki-current.md, 1.2) and
of the names NKI 0.6 removed (nkisim.nki06.names, which the simulator answers with too); NKI 0.6
back to the legacy dialect, the one rule every call breaks."""
from __future__ import annotations

import ast
import inspect
from functools import lru_cache

from nkisim.nki06.names import DESTINATION_FIRST, REMOVED_KEYWORDS

from ..dialect import CURRENT, LEGACY, Dialect

DST_FIRST = DESTINATION_FIRST
RESULT_RETURNED = ("legacy nki.isa calls return their result and take no dst, e.g. "
                   "psum += nisa.nc_matmul(stationary, moving) or res[...] = nisa.tensor_copy(src)")


def first_rule(nodes: list, flow, parent: dict, skip: set[int], expected: Dialect) -> tuple[int, str] | None:
    """(line, rule) of the first node outside `skip` that breaks `expected`'s rules, or None.
    `flow` resolves a node to the dotted paths it may stand for (grader.precheck.flow)."""
    rule = _to_current if expected is CURRENT else _to_legacy
    found = []
    for node in nodes:
        if isinstance(node, (ast.Call, ast.Attribute)) and id(node) not in skip:
            text = rule(node, flow, parent)
            if text:
                found.append((node.lineno, node.col_offset, text))
    return min(found)[::2] if found else None


def _calls(node, flow, package: str) -> list[tuple[str, str]]:
    """(module, name) of each NKI function of `package` the call may call ("isa", "nc_matmul")."""
    hits = []
    for path in flow.resolve(node.func):
        if path.startswith(package + "."):
            module, _, name = path[len(package) + 1:].rpartition(".")
            hits.append((module, name))
    return sorted(hits)


def _to_current(node, flow, parent) -> str | None:
    """What a legacy construct must become in NKI 0.6."""
    if isinstance(node, ast.Attribute):
        return _removed_name(flow, node)
    for module, name in _calls(node, flow, LEGACY.package):
        keywords = {k.arg for k in node.keywords}
        for keyword, rule in REMOVED_KEYWORDS.items():
            if keyword in keywords and (module == "isa" or keyword == "mask"):
                return rule
        if module == "isa" and name in _current_dst_first() and not isinstance(parent.get(id(node)), ast.Expr):
            return DST_FIRST                  # its value is used: the legacy call returned a tile
    return None


def _removed_name(flow, node: ast.Attribute) -> str | None:
    from nkisim.nki06.names import ISA_REMOVED, LANGUAGE_REMOVED, NKI_REMOVED
    tables = {"language": ("nl.", LANGUAGE_REMOVED), "isa": ("nisa.", ISA_REMOVED), "": ("nki.", NKI_REMOVED)}
    for path in sorted(flow.resolve(node)):
        if not path.startswith(LEGACY.package + "."):
            continue
        module, _, name = path[len(LEGACY.package) + 1:].rpartition(".")
        prefix, table = tables.get(module, ("", {}))
        if name in table:
            shown = prefix + name
            return table[name] if table[name].startswith(shown) else f"{shown}: {table[name]}"
    return None


def _to_legacy(node, flow, parent) -> str | None:
    """What an NKI 0.6 call must become in the legacy dialect: its result returned, no dst."""
    if not isinstance(node, ast.Call):
        return None
    for module, name in _calls(node, flow, CURRENT.package):
        if module != "isa" or name not in _current_dst_first() or name in _legacy_dst():
            continue
        if any(k.arg == "dst" for k in node.keywords) or isinstance(parent.get(id(node)), ast.Expr):
            return RESULT_RETURNED
    return None


@lru_cache(maxsize=None)
def _current_dst_first() -> frozenset[str]:
    """The NKI 0.6 instructions that take dst first (every instruction, by the 0.6 API)."""
    from nkisim.nki06 import isa
    return frozenset(name for name, fn in vars(isa).items() if _first_parameter(fn) == "dst")


@lru_cache(maxsize=None)
def _legacy_dst() -> frozenset[str]:
    """The legacy instructions that take a dst (nisa.dma_copy(dst=..., src=...))."""
    from nkisim.nki import isa
    return frozenset(name for name, fn in vars(isa).items() if "dst" in _parameters(fn))


def _parameters(fn) -> tuple[str, ...]:
    if not inspect.isfunction(fn):
        return ()
    return tuple(inspect.signature(fn).parameters)


def _first_parameter(fn) -> str | None:
    names = _parameters(fn)
    return names[0] if names else None

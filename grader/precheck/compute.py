"""Per-problem instruction rules, e.g. that part 1's matrix_transpose computes only with
nisa.nc_transpose, in either NKI dialect (an instruction has one name in both)."""
from __future__ import annotations

import ast

from nkisim.dialects import DIALECTS

from .results import Violation, parse, dedupe_sorted, src


def _chain(node):
    """`a.b.c` -> ('a', ['b', 'c']); anything else -> None."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, attrs[::-1]
    return None


class _Aliases:
    """Which dotted module paths each name may stand for, from imports and simple aliases
    (`x = nl.transpose`), ignoring scopes: conservative, as a static checker should be."""

    def __init__(self, tree: ast.AST):
        self.imported: dict[str, str] = {}          # names bound by import statements
        self.paths: dict[str, set[str]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self._bind(a.asname, a.name)
                    else:
                        top = a.name.split(".")[0]
                        self._bind(top, top)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        self._bind(a.asname or a.name, f"{node.module}.{a.name}")
        assigns = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
                   and n.value is not None]
        changed = True
        while changed:                  # propagate `a = np`, `b = a.random`, ... to a fixpoint
            changed = False
            for node in assigns:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                values = self.resolve(node.value)
                if not values:
                    continue
                for t in targets:
                    if isinstance(t, ast.Name):
                        before = len(self.paths.get(t.id, ()))
                        self.paths.setdefault(t.id, set()).update(values)
                        changed |= len(self.paths[t.id]) != before

    def _bind(self, name, path):
        self.imported[name] = path
        self.paths.setdefault(name, set()).add(path)

    def resolve(self, node) -> set[str]:
        chain = _chain(node)
        if chain is None or chain[0] not in self.paths:
            return set()
        root, attrs = chain
        return {".".join([p, *attrs]) for p in self.paths[root]}

    def tainted(self, name: str) -> bool:
        return name in self.paths


NL = "nl"
NISA = "nisa"
# Each dialect's language and isa modules, by what a kernel calls them: an instruction is named
# the same in both ("nisa.nc_transpose" is neuronxcc.nki.isa's and nki.isa's)
_MODULES = {f"{d.package}.{module}": short for d in DIALECTS.values()
            for module, short in (("language", NL), ("isa", NISA))}
# Always allowed in compute_violations: data movement, allocation, iteration, indexing.
DATA_MOVEMENT = frozenset({
    "dma_copy", "tensor_copy", "copy", "memset", "ndarray", "zeros", "ones", "full", "empty_like",
    "zeros_like", "ones_like", "full_like", "load", "store", "affine_range", "sequential_range",
    "static_range", "par_dim", "tile_size", "mgrid", "arange", "device_print", "program_id",
    "num_programs", "program_ndim", "ds", "shared_constant", "shared_identity_matrix"})
# nisa names that are constants or enums, not instructions (references to them are fine).
_ISA_NON_INSTRUCTIONS = frozenset({
    "engine", "reduce_cmd", "dge_mode", "oob_mode", "matmul_perf_mode", "nc_version", "get_nc_version", "fp32",
    "constants", "unknown_engine", "tensor_engine", "scalar_engine", "gpsimd_engine",
    "vector_engine", "dma_engine"})
# nl functions that compute a whole matrix result; flagged even when passed around uncalled.
# (Other nl names such as nl.add are routinely passed as op= arguments.)
_NL_MATRIX_OPS = frozenset({"transpose", "matmul", "load_transpose2d"})


def compute_violations(source: str, function: str, allowed: set[str]) -> list[Violation]:
    """Calls to NKI compute instructions in `function` (and the module-level helpers it uses)
    other than those in `allowed`, data movement and allocation.

    `allowed` holds bare instruction names ("nc_transpose": from any NKI module) or qualified
    ones ("nisa.nc_transpose", "nl.copy", "neuronxcc.nki.isa.nc_transpose", "nki.isa.nc_transpose"),
    the same in either NKI dialect. A function the file does not define at module level gives no
    violations (the submission check reports it).
    """
    tree, error = parse(source, "the kernel file")
    if error:
        return [error]
    aliases = _Aliases(tree)
    defs: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Lambda):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    defs[t.id] = stmt.value
    if function not in defs:
        return []
    permitted_bare, permitted_qualified = set(), set()
    for entry in allowed:
        if "." in entry:
            module, _, name = entry.rpartition(".")
            module = _MODULES.get(module, module)
            permitted_qualified.add(f"{module}.{name}")
        else:
            permitted_bare.add(entry)
    allowed_text = _join(sorted(allowed)) if allowed else "no instruction"

    def permitted(module: str, name: str) -> bool:
        return (name in DATA_MOVEMENT or name.endswith("_like") or name in permitted_bare
                or f"{module}.{name}" in permitted_qualified)

    out: list[Violation] = []
    queue, seen = [function], {function}
    while queue:
        current = queue.pop(0)
        fn = defs[current]
        where = function if current == function else f"helper {current} (used by {function})"
        body = fn.body if isinstance(fn.body, list) else [fn.body]
        nodes = [n for stmt in body for n in ast.walk(stmt)]
        call_funcs = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        for node in nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in defs \
                    and node.id not in seen:
                seen.add(node.id)
                queue.append(node.id)
            if not isinstance(node, (ast.Name, ast.Attribute)) or id(node) in inner \
                    or not isinstance(node.ctx, ast.Load):
                continue
            is_call = id(node) in call_funcs
            for path in sorted(aliases.resolve(node)):
                hit = _instruction(path)
                if hit is None:
                    continue
                module, name = hit
                if permitted(module, name):
                    continue
                if not is_call and not (module == NISA and name not in _ISA_NON_INSTRUCTIONS
                                        or module == NL and name in _NL_MATRIX_OPS):
                    continue
                shown = f"{module}.{name}"
                if src(node) != shown:
                    shown += f" (as `{src(node)}`)"
                how = "calls" if is_call else "refers to"
                out.append(Violation(
                    node.lineno, "compute-instruction",
                    f"{where} {how} {shown}, a compute instruction that is not allowed here: "
                    f"only {allowed_text} may compute in {function}, besides data movement and allocation "
                    f"(dma_copy, tensor_copy, ndarray, ...)."))
                break
    return dedupe_sorted(out)


def _instruction(path: str):
    """("nl" or "nisa", the instruction's name) of a path into either dialect's modules, or None."""
    for module, short in _MODULES.items():
        if path.startswith(module + "."):
            return short, path[len(module) + 1:].split(".")[0]
    return None


def _join(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

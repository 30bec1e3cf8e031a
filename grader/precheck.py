"""Static checks of untrusted kernel source, by AST only: the code is never imported or run.

`precheck` flags what a kernel file has no business doing (foreign imports, file access,
dynamic code, interpreter internals, patching the modules the grader relies on).
`compute_violations` enforces per-problem instruction rules, e.g. that part 1's
matrix_transpose computes only with nisa.nc_transpose.

This is defence in depth, not the security boundary: the sandboxed child process is. The
checks aim to catch the obvious cheats and give a clear message, with no false alarms on
ordinary kernels.
"""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

# Modules a kernel file may import (a name or any of its submodules), except the denied ones.
ALLOWED_IMPORTS = ("numpy", "math", "neuronxcc.nki")
# numpy submodules that reach native code or build tools.
DENIED_NUMPY_SUBMODULES = frozenset({"ctypeslib", "f2py", "distutils"})
# numpy functions that read or write files.
NUMPY_FILE_IO = frozenset({
    "load", "save", "savez", "savez_compressed", "loadtxt", "savetxt", "genfromtxt", "fromfile",
    "fromregex", "memmap", "DataSource", "recfromtxt", "recfromcsv"})
NUMPY_FILE_IO_MODULES = ("numpy.lib.format", "numpy.lib.npyio", "numpy.lib._npyio_impl")

_WHY_DYNAMIC = "it runs code the checker cannot see"
_WHY_REFLECT = "it reaches objects by computed names, which bypasses these checks"
FORBIDDEN_BUILTINS = {
    "open": "it reads or writes files, and a kernel gets its data only from its arguments",
    "input": "it reads from the terminal, and a kernel gets its data only from its arguments",
    "breakpoint": "it starts a debugger inside the grader",
    "exec": _WHY_DYNAMIC,
    "eval": _WHY_DYNAMIC,
    "compile": _WHY_DYNAMIC,
    "__import__": "it imports modules by name, bypassing the import rules",
    "globals": _WHY_REFLECT,
    "locals": _WHY_REFLECT,
    "vars": _WHY_REFLECT,
    "getattr": _WHY_REFLECT,
    "setattr": _WHY_REFLECT,
    "delattr": _WHY_REFLECT,
}
# Module-level dunder names a file may assign (metadata only).
_ASSIGNABLE_DUNDERS = frozenset({"__all__", "__version__", "__author__"})

NL = "neuronxcc.nki.language"
NISA = "neuronxcc.nki.isa"
# Always allowed in compute_violations: data movement, allocation, iteration, indexing.
DATA_MOVEMENT = frozenset({
    "dma_copy", "tensor_copy", "copy", "memset", "ndarray", "zeros", "ones", "full", "empty_like",
    "zeros_like", "ones_like", "full_like", "load", "store", "affine_range", "sequential_range",
    "static_range", "par_dim", "tile_size", "mgrid", "arange", "device_print", "program_id",
    "num_programs", "program_ndim", "ds", "shared_constant", "shared_identity_matrix"})
# nisa names that are constants or enums, not instructions (references to them are fine).
_ISA_NON_INSTRUCTIONS = frozenset({
    "engine", "reduce_cmd", "dge_mode", "oob_mode", "nc_version", "get_nc_version", "fp32",
    "constants", "unknown_engine", "tensor_engine", "scalar_engine", "gpsimd_engine",
    "vector_engine", "dma_engine"})
# nl functions that compute a whole matrix result; flagged even when passed around uncalled.
# (Other nl names such as nl.add are routinely passed as op= arguments.)
_NL_MATRIX_OPS = frozenset({"transpose", "matmul", "load_transpose2d"})
_SHORT = {NL: "nl", NISA: "nisa"}


@dataclass(frozen=True)
class Violation:
    line: int
    rule: str        # syntax | import | forbidden-call | dunder | private | monkey-patch |
                     # global-import | file-io | compute-instruction
    message: str


# ----------------------------------------------------------------------------- parsing helpers

def _parse(source: str, filename: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, filename), None
    except SyntaxError as err:
        return None, Violation(err.lineno or 0, "syntax",
                               f"{filename} does not parse ({err.msg}), so it cannot be checked.")
    except (ValueError, RecursionError, MemoryError) as err:
        return None, Violation(0, "syntax", f"{filename} cannot be parsed ({type(err).__name__}), "
                                            f"so it cannot be checked.")


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


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


# ----------------------------------------------------------------------------- precheck

def precheck(source: str, filename: str) -> list[Violation]:
    """Static checks of one kernel file; an empty list means nothing was found."""
    tree, error = _parse(source, filename)
    if error:
        return [error]
    aliases = _Aliases(tree)
    out: list[Violation] = []

    def add(node, rule, message):
        out.append(Violation(getattr(node, "lineno", 0), rule, message))

    main_guard = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))):
            sides = [node.left, node.comparators[0]]
            names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
            consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
            if names and consts:
                main_guard.add(id(names[0]))
    bound = _bound_names(tree)
    call_funcs = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                _check_import(add, node, a.name, None)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                add(node, "import", f"relative import `from {'.' * node.level}{node.module or ''} import ...` "
                                    f"is not allowed: a kernel file is graded on its own, so it may import only "
                                    f"numpy, math and neuronxcc.nki.")
                continue
            for a in node.names:
                _check_import(add, node, node.module, a.name)

        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS:
            name = node.func.id
            add(node, "forbidden-call", f"call to {name}() is not allowed in a kernel file: "
                                        f"{FORBIDDEN_BUILTINS[name]}.")

        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_BUILTINS:
                if id(node) not in call_funcs and isinstance(node.ctx, ast.Load) and node.id not in bound:
                    add(node, "forbidden-call", f"reference to the built-in {node.id} is not allowed in a kernel "
                                                f"file: {FORBIDDEN_BUILTINS[node.id]}.")
            elif _is_dunder(node.id) and id(node) not in main_guard and not (
                    isinstance(node.ctx, ast.Store) and node.id in _ASSIGNABLE_DUNDERS):
                add(node, "dunder", f"use of the name {node.id} is not allowed: dunder names expose interpreter "
                                    f"internals that can bypass the grader's checks (only the "
                                    f"`if __name__ == \"__main__\"` guard is allowed).")

        elif isinstance(node, ast.Attribute):
            if _is_dunder(node.attr):
                add(node, "dunder", f"access to the attribute {node.attr} (`{_src(node)}`) is not allowed: dunder "
                                    f"attributes expose interpreter internals that can bypass the grader's checks.")
            elif node.attr.startswith("_"):
                add(node, "private", f"access to the private attribute {node.attr} (`{_src(node)}`) is not allowed: "
                                     f"private attributes are the simulator's internals (a device tensor's values "
                                     f"among them), which a kernel must not touch.")
            elif isinstance(node.ctx, ast.Load) and id(node) not in inner:
                _check_numpy_use(add, node, aliases)

        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            kw = "global" if isinstance(node, ast.Global) else "nonlocal"
            for name in node.names:
                if name in aliases.imported:
                    add(node, "global-import", f"`{kw} {name}` is not allowed: {name} is bound by an import, and "
                                               f"rebinding imported names from inside a function is a way to "
                                               f"tamper with modules the grader uses.")

        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _target_root(node)
            if root is not None and aliases.tainted(root):
                verb = "deleting" if isinstance(node.ctx, ast.Del) else "assigning to"
                add(node, "monkey-patch", f"{verb} `{_src(node)}` is not allowed: {root} comes from an import, and "
                                          f"changing imported modules or their objects can tamper with the grader.")

    return _sorted(out)


def _check_import(add, node, module: str, name: str | None):
    full = module if name is None else f"{module}.{name}"
    shown = f"import {module}" if name is None else f"from {module} import {name}"
    if module == "__future__":
        return
    if name == "*":
        add(node, "import", f"`{shown}` is not allowed: a star import hides which names the kernel uses, so the "
                            f"checker cannot verify them; import the module under an alias instead.")
        return
    parts = full.split(".")
    if any(_is_dunder(p) for p in parts):
        add(node, "dunder", f"`{shown}` is not allowed: dunder names expose interpreter internals that can "
                            f"bypass the grader's checks.")
        return
    if not any(full == m or full.startswith(m + ".") for m in ALLOWED_IMPORTS):
        add(node, "import", f"`{shown}` is not allowed: a kernel file may import only numpy, math and "
                            f"neuronxcc.nki (and its submodules), since other modules give access to files, "
                            f"processes or the grader itself.")
    elif parts[0] == "numpy" and len(parts) > 1 and parts[1] in DENIED_NUMPY_SUBMODULES:
        add(node, "import", f"`{shown}` is not allowed: numpy.{parts[1]} reaches native code or build tools, "
                            f"which a kernel has no use for.")
    elif _is_numpy_io(full):
        add(node, "file-io", f"`{shown}` is not allowed: {full} reads or writes files, and a kernel gets its "
                             f"data only from its arguments.")


def _is_numpy_io(path: str) -> bool:
    parts = path.split(".")
    if len(parts) >= 2 and parts[0] == "numpy" and parts[1] in NUMPY_FILE_IO:
        return True
    return any(path == m or path.startswith(m + ".") for m in NUMPY_FILE_IO_MODULES)


def _check_numpy_use(add, node: ast.Attribute, aliases: _Aliases):
    for path in sorted(aliases.resolve(node)):
        parts = path.split(".")
        if parts[0] != "numpy" or len(parts) < 2:
            continue
        if parts[1] in DENIED_NUMPY_SUBMODULES:
            add(node, "import", f"`{_src(node)}` is not allowed: numpy.{parts[1]} reaches native code or build "
                                f"tools, which a kernel has no use for.")
            return
        if _is_numpy_io(path):
            add(node, "file-io", f"`{_src(node)}` is not allowed: numpy's file functions read or write files, "
                                 f"and a kernel gets its data only from its arguments.")
            return
    if node.attr == "tofile":
        add(node, "file-io", f"`{_src(node)}` is not allowed: tofile writes files, and a kernel returns its "
                             f"results only as its output tensor.")


def _target_root(node) -> str | None:
    """Root name of an assignment target like `a.b[0].c`, if the chain contains an attribute."""
    has_attr = False
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        has_attr |= isinstance(node, ast.Attribute)
        node = node.value
    return node.id if isinstance(node, ast.Name) and has_attr else None


def _bound_names(tree) -> set[str]:
    """Every name the file binds anywhere (assignment, parameter, def, class, import)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name.split(".")[0]) for a in node.names)
    return names


def _src(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _sorted(violations):
    return sorted(set(violations), key=lambda v: (v.line, v.rule, v.message))


# ----------------------------------------------------------------------------- compute rules

def compute_violations(source: str, function: str, allowed: set[str]) -> list[Violation]:
    """Calls to NKI compute instructions in `function` (and the module-level helpers it uses)
    other than those in `allowed`, data movement and allocation.

    `allowed` holds bare instruction names ("nc_transpose": from any NKI module) or qualified
    ones ("nisa.nc_transpose", "nl.copy", "neuronxcc.nki.isa.nc_transpose"). A function the
    file does not define at module level gives no violations (the submission check reports it).
    """
    tree, error = _parse(source, "the kernel file")
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
            module = {"nl": NL, "nisa": NISA, "nki.language": NL, "nki.isa": NISA}.get(module, module)
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
                shown = f"{_SHORT[module]}.{name}"
                if _src(node) != shown:
                    shown += f" (as `{_src(node)}`)"
                how = "calls" if is_call else "refers to"
                out.append(Violation(
                    node.lineno, "compute-instruction",
                    f"{where} {how} {shown}, a compute instruction that is not allowed here: "
                    f"only {allowed_text} may compute in {function}, besides data movement and allocation "
                    f"(dma_copy, tensor_copy, ndarray, ...)."))
                break
    return _sorted(out)


def _instruction(path: str):
    for module in (NL, NISA):
        if path.startswith(module + "."):
            return module, path[len(module) + 1:].split(".")[0]
    return None


def _join(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

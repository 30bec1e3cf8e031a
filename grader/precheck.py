"""Static checks of untrusted kernel source, by AST only: the code is never imported or run.

`precheck` is the second wall behind the sandbox and trace-then-execute (the kernel never
holds values; the grader executes its traced program). It rejects (severity "error") only
what reaches files, processes, the network or interpreter internals: calls of open, exec,
eval, compile, __import__, breakpoint and reflective builtins; modules that reach those
(subprocess, socket, ctypes, importlib, pickle, ...) and the harmful corners of otherwise
harmless ones (os.system, sys.modules, np.testing.runstring, np.load, ...); dunder and
frame attributes; patching imported modules, also through aliases, parameters and
containers. Anything else a real kernel file does is fine, and what is merely untidy (an
unused or debugging import, a pdb.set_trace left in, forbidden code in the
`if __name__ == "__main__":` block that grading never runs) is a warning.

`compute_violations` enforces per-problem instruction rules, e.g. that part 1's
matrix_transpose computes only with nisa.nc_transpose.
"""
from __future__ import annotations

import ast
import importlib
import string
import sys
import types
import warnings
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable

import numpy as np

# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Violation:
    line: int
    rule: str        # syntax | import | module-use | forbidden-call | dunder | private | internals |
                     # monkey-patch | module-escape | file-io | unused-import | debugger | compute-instruction
    message: str
    severity: str = "error"     # "error" rejects the file; "warning" is only reported


# ----------------------------------------------------------------------------- why things are refused

_FILES = "it reads or writes files, and a kernel gets its data only from its arguments"
_PROCESSES = "it reaches processes, threads or signals, which a kernel has no use for"
_NETWORK = "it reaches the network, which a kernel has no use for"
_INTERNALS = "it reaches interpreter internals (frames, code, the import system), which can bypass these checks"
_RUNS_CODE = "it runs code from a string, which the checker cannot see"
_REFLECT = "it reaches attributes by computed names, which bypasses these checks"
_NATIVE = "it reaches native code or build tools, which a kernel has no use for"
_GRADER = "it is the grader's or the simulator's own code, which a kernel must not touch"

# Modules a kernel file may not even import (a name or any of its submodules).
DENIED_MODULES = {
    **dict.fromkeys(("io", "pathlib", "shutil", "tempfile", "glob", "fileinput", "linecache", "tarfile",
                     "zipfile", "gzip", "bz2", "lzma", "shelve", "dbm", "sqlite3", "mmap", "filecmp",
                     "codecs", "pickle", "cPickle", "_pickle", "marshal", "copyreg"), _FILES),
    **dict.fromkeys(("subprocess", "multiprocessing", "threading", "_thread", "concurrent", "asyncio",
                     "signal", "pty", "posix", "nt", "resource", "faulthandler", "webbrowser", "antigravity",
                     "platform", "getpass", "pwd", "grp", "spwd", "crypt", "termios", "tty", "fcntl",
                     "select", "selectors", "sched"), _PROCESSES),
    **dict.fromkeys(("socket", "ssl", "http", "urllib", "urllib3", "requests", "ftplib", "smtplib",
                     "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver"), _NETWORK),
    **dict.fromkeys(("builtins", "__builtin__", "importlib", "imp", "pkgutil", "zipimport", "runpy", "inspect",
                     "gc", "dis", "symtable", "tracemalloc", "trace", "site", "sysconfig", "unittest.mock",
                     "bdb", "cProfile", "profile", "pstats"), _INTERNALS),
    **dict.fromkeys(("code", "codeop", "timeit", "doctest"), _RUNS_CODE),
    **dict.fromkeys(("ctypes", "cffi", "distutils", "setuptools", "pip", "numba", "cython", "Cython"), _NATIVE),
    **dict.fromkeys(("nkisim", "grader", "reference_kernels", "student_template", "workers", "web", "store",
                     "tests"), _GRADER),
    **{"numpy.ctypeslib": _NATIVE, "numpy.f2py": _NATIVE, "numpy.distutils": _NATIVE,
       "numpy.lib.format": _FILES, "numpy.lib.npyio": _FILES, "numpy.lib._npyio_impl": _FILES,
       "numpy.lib._datasource": _FILES, "numpy.lib.utils": _INTERNALS, "numpy.lib.introspect": _INTERNALS,
       "numpy.ma": _FILES + " (numpy.ma.load/dump unpickle files)", "numpy.rec": _FILES + " (numpy.rec.fromfile)",
       "numpy.core": "it is numpy's internals (use the names at the top of numpy)",
       "numpy._core": "it is numpy's internals (use the names at the top of numpy)"},
}


# ----------------------------------------------------------------------------- module policies

@dataclass(frozen=True)
class _Policy:
    """What a kernel may reach inside one module. `check` gets the attribute chain after the
    module (`["path", "join"]` for os.path.join) and returns why it is refused, or None.
    `walks`: an attribute that is itself a module is then judged by that module's policy."""
    check: Callable[[list[str]], str | None]
    walks: bool


def _open(deny: dict[str, str] | None = None) -> _Policy:
    """Every attribute but the denied ones."""
    deny = deny or {}
    return _Policy(lambda chain: deny.get(chain[0]), walks=True)


def _only(entries: str, why: str) -> _Policy:
    """Only these attribute chains ("path.join"; "float_info.*" allows anything below float_info)
    and their prefixes (so `p = os.path` then `p.join(...)` is judged as os.path.join)."""
    exact, below = set(), set()
    for entry in entries.split():
        (below if entry.endswith(".*") else exact).add(tuple(entry.removesuffix(".*").split(".")))

    def check(chain):
        c = tuple(chain)
        if c in exact or any(c[:len(p)] == p for p in below):
            return None
        if any(e[:len(c)] == c for e in exact | below):
            return None
        return why
    return _Policy(check, walks=False)


def _numpy_check(chain: list[str]) -> str | None:
    name = chain[0]
    if name in NUMPY_FILE_IO:
        return _FILES
    if name in _NUMPY_REFUSED:
        return _NUMPY_REFUSED[name]
    if name in _numpy_names() or name in _NUMPY_SUBMODULES or name not in _NUMPY_LAZY:
        return None         # a name numpy lacks (np.float_ in numpy 2) fails at run time with its own error
    return ("it is not among the numpy modules a kernel file may use (numpy.random, linalg, fft, "
            "testing.assert_*, lib.stride_tricks, ...)")


# numpy functions that read or write files (also refused as `arr.tofile(...)` / `arr.dump(...)`).
NUMPY_FILE_IO = frozenset({
    "load", "save", "savez", "savez_compressed", "loadtxt", "savetxt", "genfromtxt", "fromfile",
    "fromregex", "memmap", "DataSource", "recfromtxt", "recfromcsv", "tofile", "dump"})
_NUMPY_REFUSED = {
    **dict.fromkeys(("info", "source", "who", "lookfor", "show_config", "show_runtime", "get_include",
                     "byte_bounds", "safe_eval", "deprecate", "deprecate_with_doc", "add_newdoc",
                     "add_docstring", "add_newdoc_ufunc", "set_string_function"), _INTERNALS),
    "test": "it runs numpy's own test suite (pytest), which a kernel has no use for",
}
# numpy's submodules a kernel may use; the others are refused by DENIED_MODULES or as unknown.
_NUMPY_SUBMODULES = frozenset({"random", "linalg", "fft", "testing", "typing", "polynomial", "emath", "dtypes",
                               "exceptions", "lib", "char", "strings"})
# What numpy's module __getattr__ imports on first use (numpy 2.x), besides the ones above.
_NUMPY_LAZY = frozenset({"ma", "ctypeslib", "matlib", "f2py", "rec", "core", "distutils", "array_api"})


@lru_cache(maxsize=None)
def _numpy_names() -> frozenset[str]:
    """numpy's public top-level values: dtypes and scalar types, constants, ufuncs (also the
    ALU op names NKI accepts, like np.add) and array functions, printing options. Modules are
    left out: each is judged by its own policy."""
    return frozenset(name for name, value in vars(np).items()
                     if not name.startswith("_") and not isinstance(value, types.ModuleType))


def _numpy_testing(chain):
    return None if chain[0].startswith("assert") else \
        "of numpy.testing only the assert_* functions are allowed (others run source strings or touch files)"


_HARMLESS_OS = ("path path.join path.basename path.dirname path.split path.splitext path.normpath path.isabs "
                "path.abspath path.realpath path.relpath path.normcase path.expanduser path.sep path.extsep "
                "path.commonprefix path.commonpath environ environ.get getenv cpu_count getpid getcwd sep "
                "linesep name curdir pardir extsep")
_HARMLESS_SYS = ("maxsize float_info.* int_info.* version version_info.* hexversion implementation.* platform "
                 "byteorder maxunicode float_repr_style stdout stdout.write stdout.flush stderr stderr.write "
                 "stderr.flush exit argv getsizeof getrecursionlimit setrecursionlimit path path.append "
                 "path.insert path.extend")

POLICIES: dict[str, _Policy] = {
    "neuronxcc": _Policy(lambda chain: None if chain[0] == "nki" else
                         "only neuronxcc.nki is the NKI API; the rest of neuronx-cc is the compiler's internals",
                         walks=True),
    "numpy": _Policy(_numpy_check, walks=True),
    "numpy.testing": _Policy(_numpy_testing, walks=False),
    "numpy.lib": _Policy(lambda chain: None if chain[0] in {"stride_tricks", "scimath", "mixins", "array_utils",
                                                           "NumpyVersion"} else
                         "of numpy.lib only stride_tricks, scimath, mixins and array_utils are allowed", walks=True),
    **dict.fromkeys(("numpy.random", "numpy.linalg", "numpy.fft", "numpy.typing", "numpy.polynomial",
                     "numpy.emath", "numpy.dtypes", "numpy.exceptions", "numpy.char", "numpy.strings",
                     "numpy.lib.scimath", "numpy.lib.mixins",
                     "numpy.lib.array_utils"), _open()),
    **dict.fromkeys(("math", "cmath", "itertools", "functools", "collections", "collections.abc", "enum", "abc",
                     "copy", "numbers", "random", "statistics", "fractions", "decimal", "heapq", "bisect", "re",
                     "json", "pprint", "textwrap", "time", "dataclasses", "__future__"), _open()),
    "contextlib": _open({"chdir": "it changes the working directory, which a kernel has no use for"}),
    "typing": _open({"get_type_hints": _RUNS_CODE + " (string annotations are evaluated)",
                     "ForwardRef": _RUNS_CODE, "evaluate_forward_ref": _RUNS_CODE}),
    "operator": _open({"attrgetter": _REFLECT, "methodcaller": _REFLECT}),
    "warnings": _open({"warn_explicit": "it loads module source through loaders, which a kernel has no use for"}),
    "logging": _open({"FileHandler": _FILES, "handlers": _FILES + " or sockets", "config": _FILES + " or sockets",
                      "currentframe": _INTERNALS}),
    "string": _open({"Formatter": _REFLECT + " (Formatter.get_field hands back the objects it names)"}),
    "numpy.lib.stride_tricks": _open({"as_strided": "it reads and writes raw memory outside the array, which can "
                                                    "corrupt the interpreter (sliding_window_view is the safe form)"}),
    "argparse": _open({"FileType": _FILES}),
    "unittest": _only("TestCase TestCase.* main skip skipIf skipUnless expectedFailure SkipTest TestSuite "
                      "TextTestRunner", "of unittest only TestCase, main, skip*, expectedFailure, SkipTest, "
                                        "TestSuite and TextTestRunner are allowed (the loaders import by name)"),
    "traceback": _only("print_exc format_exc print_exception format_exception format_exception_only",
                       "of traceback only print_exc, format_exc, print_exception, format_exception and "
                       "format_exception_only are allowed (the others reach frames)"),
    "pdb": _only("set_trace", "of pdb only set_trace is allowed (the others run code strings)"),
    "types": _only("SimpleNamespace NoneType", "of types only SimpleNamespace is allowed (the others build code "
                                               "and functions by hand)"),
    "os": _only(_HARMLESS_OS, "of os a kernel file may use only os.path's string functions (join, basename, "
                              "dirname, split, splitext), os.environ.get/os.getenv and os.cpu_count; "
                              "the rest reaches files or processes"),
    "sys": _only(_HARMLESS_SYS, "of sys a kernel file may use only constants (sys.maxsize, sys.version_info, "
                                "...), sys.stdout/sys.stderr, sys.argv, sys.exit and sys.path.append; the rest "
                                "(sys.modules, sys._getframe, sys.settrace, ...) reaches interpreter internals"),
}
# Harmless to import (when unused) and handy while debugging; anything else unused is a warning too.
_TEMPLATE_MODULES = ("numpy", "neuronxcc", "__future__")    # the starter files' own imports: never warned

# Calls checked by their arguments: canonical path -> (keywords or "args" that are refused, why).
_CALL_RULES = {
    "logging.basicConfig": ({"filename", "filemode"}, _FILES),
    "argparse.ArgumentParser": ({"fromfile_prefix_chars"}, _FILES),
    "unittest.main": ({"args", "module", "defaultTest", "argv", "testLoader", "testRunner"},
                      "with arguments it imports and runs modules by name"),
}


def _denied(module: str) -> str | None:
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        reason = DENIED_MODULES.get(".".join(parts[:i]))
        if reason:
            return reason
    return None


def _policy_of(module: str) -> _Policy | None:
    if module == "neuronxcc.nki" or module.startswith("neuronxcc.nki."):
        return _open()
    return POLICIES.get(module)


# Module objects known without importing anything: numpy's lazily loaded submodules and NKI's.
_STATIC_MODULES = frozenset(
    [f"numpy.{m}" for m in _NUMPY_SUBMODULES | {"core", "_core", "ctypeslib", "f2py", "distutils", "ma", "rec",
                                                "matlib", "version"}]
    + ["neuronxcc.nki", "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.compiler",
       "neuronxcc.nki.typing", "neuronxcc.nki.isa.constants"])
# What stands in for NKI's modules when the simulator's facade is looked into.
_FACADE = "nkisim.nki"
_FACADE_MODULES = frozenset({_FACADE, f"{_FACADE}.language", f"{_FACADE}.isa", f"{_FACADE}.compiler",
                             f"{_FACADE}.typing"})


def _loaded(module: str):
    """The module object to look into, without running any of its code: NKI's through the
    simulator's facade, numpy's only when already imported, standard ones from POLICIES."""
    try:
        if module == "neuronxcc.nki" or module.startswith("neuronxcc.nki."):
            name = _FACADE + module[len("neuronxcc.nki"):]
            return importlib.import_module(name) if name in _FACADE_MODULES else None
        if module.split(".")[0] == "numpy":
            return sys.modules.get(module)
        if module in POLICIES or module.split(".")[0] in POLICIES:
            return importlib.import_module(module)
    except ImportError:
        return None
    return None


@lru_cache(maxsize=4096)
def _submodule(module: str, attr: str) -> str | None:
    """The canonical name of `module.attr` when it is a module (`logging.os` -> "os"), else None.
    Reads module dictionaries only, so no module `__getattr__` hook ever runs."""
    dotted = f"{module}.{attr}"
    if dotted in _STATIC_MODULES:
        return dotted
    owner = _loaded(module)
    value = vars(owner).get(attr) if owner is not None else None
    if not isinstance(value, types.ModuleType):
        return None
    if sys.modules.get(dotted) is value:
        return dotted
    name = value.__name__
    if name == _FACADE or name.startswith(_FACADE + "."):
        return "neuronxcc.nki" + name[len(_FACADE):]
    return name


@lru_cache(maxsize=4096)
def _judge(path: str) -> tuple[str, str] | None:
    """Why reaching `path` (a dotted name from an import) is refused, as (reason, module), or None."""
    parts = path.split(".")
    module, rest = parts[0], parts[1:]
    while True:
        reason = _denied(module)
        if reason:
            return reason, module
        policy = _policy_of(module)
        if policy is None:
            return None if module == parts[0] else (f"it reaches the module {module}, which a kernel has no "
                                                    f"use for", module)
        if not rest or rest[0].startswith("_"):
            return None                     # dunder and private attributes have rules of their own
        reason = _denied(f"{module}.{rest[0]}")
        if reason:
            return reason, f"{module}.{rest[0]}"
        reason = policy.check(rest)
        if reason:
            return reason, module
        sub = _submodule(module, rest[0]) if policy.walks else None
        if sub is None:
            return None
        module, rest = sub, rest[1:]


def _star_names(module: str) -> list[tuple[str, str]] | None:
    """The names `from module import *` binds, as (bound, name) pairs, when they can be known."""
    owner = _loaded(module)
    if owner is None:
        return None
    names = vars(owner).get("__all__")
    if not isinstance(names, (list, tuple)):
        names = [n for n in vars(owner) if not n.startswith("_")]
    return [(n, n) for n in names if isinstance(n, str)]


def _is_module(path: str, imported: frozenset[str]) -> bool:
    """Whether `path` names a module object (a name from `import x.y`, or a submodule of one)."""
    parts = path.split(".")
    if parts[0] not in imported:
        return False
    module = parts[0]
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i + 1])
        module = prefix if prefix in imported else _submodule(module, parts[i])
        if module is None:
            return False
    return True


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


def _src(node) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _sorted(violations):
    return sorted(set(violations), key=lambda v: (v.line, v.rule, v.message))


# ----------------------------------------------------------------------------- scopes: which names are builtins

_FORBIDDEN_BUILTINS = {
    "open": _FILES,
    "input": "it reads from the terminal, and a kernel gets its data only from its arguments",
    "help": "it starts the interactive help (a pager process)",
    "breakpoint": "it starts a debugger in the grading process",
    "exec": _RUNS_CODE,
    "eval": _RUNS_CODE,
    "compile": _RUNS_CODE,
    "__import__": "it imports modules by name, bypassing these checks",
    "globals": _REFLECT,
    "locals": _REFLECT,
    "vars": _REFLECT,
    "getattr": _REFLECT + " (a literal name, getattr(x, \"name\"), is fine)",
    "setattr": _REFLECT,
    "delattr": _REFLECT,
}
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scope:
    def __init__(self, kind: str, parent: "_Scope | None"):
        self.kind, self.parent = kind, parent          # kind: module | function | class | comprehension
        self.bound: set[str] = set()
        self.declared_global: set[str] = set()
        self.declared_nonlocal: set[str] = set()


class _Scopes(ast.NodeVisitor):
    """Python's scoping rules, enough to tell whether a name is a builtin: defaults, decorators
    and annotations belong to the enclosing scope (so `def f(exec=exec)` reads the builtin),
    comprehensions and classes have scopes of their own, functions do not see class scopes.
    At module level a name is the file's own only if bound by an unconditional top-level
    statement before the statement that reads it: lookups there fall back to builtins."""

    def __init__(self, tree: ast.Module):
        self.module = _Scope("module", None)
        self.current = self.module
        self.scope_of: dict[int, _Scope] = {}        # id(Name) -> scope it is evaluated in
        self.statement_of: dict[int, int] = {}       # id(Name) -> index of its top-level statement
        self.module_binding: dict[str, list[tuple[int, bool]]] = {}   # name -> [(statement, plain)]
        self.never_safe: set[str] = set()            # declared global/nonlocal or deleted somewhere
        self.top = 0
        for self.top, stmt in enumerate(tree.body):
            plain = isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef,
                                      ast.ClassDef, ast.Import, ast.ImportFrom))
            self._plain = stmt if plain else None
            self.visit(stmt)

    # -- bindings
    def _bind(self, name: str, node=None):
        scope = self.current
        self.current.bound.add(name)
        if scope is self.module:
            plain = node is not None and node is self._plain
            self.module_binding.setdefault(name, []).append((self.top, plain))

    def _in(self, kind: str, body):
        outer = self.current
        self.current = _Scope(kind, outer)
        try:
            body(self.current)
        finally:
            self.current = outer

    def visit_Name(self, node):
        self.scope_of[id(node)] = self.current
        self.statement_of[id(node)] = self.top
        if isinstance(node.ctx, ast.Del):
            self.never_safe.add(node.id)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node.id, self._owner(node))

    def _owner(self, node):
        # the top-level statement that binds `node` directly (x = ..., x: T = ...), if any
        plain = self._plain
        if isinstance(plain, ast.Assign) and any(t is node for t in plain.targets):
            return plain
        if isinstance(plain, ast.AnnAssign) and plain.target is node and plain.value is not None:
            return plain
        return None

    def visit_Global(self, node):
        self.current.declared_global.update(node.names)
        self.never_safe.update(node.names)

    def visit_Nonlocal(self, node):
        self.current.declared_nonlocal.update(node.names)
        self.never_safe.update(node.names)

    def visit_Import(self, node):
        for a in node.names:
            self._bind(a.asname or a.name.split(".")[0], node)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node):
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node):
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node):
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node):
        if node.rest:
            self._bind(node.rest)
        self.generic_visit(node)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        scope = self.current
        while scope.kind == "comprehension":         # := binds in the enclosing function or module
            scope = scope.parent
        outer, self.current = self.current, scope
        self.visit(node.target)
        self.current = outer

    # -- scopes
    def _arguments_outside(self, args: ast.arguments):
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)

    @staticmethod
    def _parameters(args: ast.arguments):
        return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
                if a is not None]

    def visit_FunctionDef(self, node):
        for d in node.decorator_list:
            self.visit(d)
        self._arguments_outside(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self._bind(node.name, node)

        def body(scope):
            scope.bound.update(self._parameters(node.args))
            for stmt in node.body:
                self.visit(stmt)
        self._in("function", body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._arguments_outside(node.args)

        def body(scope):
            scope.bound.update(self._parameters(node.args))
            self.visit(node.body)
        self._in("function", body)

    def visit_ClassDef(self, node):
        for n in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(n)
        self._bind(node.name, node)

        def body(scope):
            for stmt in node.body:
                self.visit(stmt)
        self._in("class", body)

    def _comprehension(self, node, *results):
        first, *rest = node.generators
        self.visit(first.iter)

        def body(scope):
            for i, gen in enumerate(node.generators):
                if i:
                    self.visit(gen.iter)
                self.visit(gen.target)
                for cond in gen.ifs:
                    self.visit(cond)
            for r in results:
                self.visit(r)
        self._in("comprehension", body)

    def visit_ListComp(self, node):
        self._comprehension(node, node.elt)

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self._comprehension(node, node.key, node.value)

    # -- lookups
    def is_builtin(self, node: ast.Name) -> bool:
        """Whether reading `node` can reach the builtin of that name."""
        name, scope = node.id, self.scope_of.get(id(node), self.module)
        own = True
        while scope is not self.module:
            if scope.kind == "class":
                if own and name in scope.bound:
                    return True                   # class bodies look names up in order: not provable
            elif name in scope.declared_global:
                break
            elif name in scope.bound and name not in scope.declared_nonlocal:
                return False
            own = False
            scope = scope.parent
        bindings = self.module_binding.get(name)
        if not bindings or name in self.never_safe or not all(plain for _, plain in bindings):
            return True
        return min(statement for statement, _ in bindings) >= self.statement_of.get(id(node), 0)


# ----------------------------------------------------------------------------- flow: what names stand for

# Builtins that hand back an element of their argument, or their argument's elements.
_ELEMENT_OF = frozenset({"next", "min", "max"})
_CONTAINER_OF = frozenset({"iter", "list", "tuple", "set", "frozenset", "sorted", "reversed", "enumerate", "zip",
                           "dict"})
# Builtins that only look at a value: passing a module to them loses nothing.
_LOOKS_ONLY = frozenset({"print", "dir", "id", "repr", "str", "isinstance", "issubclass", "hasattr", "callable",
                         "len", "hash", "bool", "format"})


class _Flow:
    """Which imported things (dotted paths like "numpy.testing") each name may stand for,
    ignoring scopes (conservative): through imports, aliases, parameters (from defaults and
    from calls of the file's own functions), return values, loop variables and containers.
    `alias[name]`: what the name may be; `holds[name]`: what a container in it may hold.
    Calls meet definitions in slots named after the function ("f#0" its first positional
    argument, "f=k" keyword k, "f*" anything unpacked, "f->" what it returns), so the work
    stays linear in the file's size however many calls and definitions share a name."""

    def __init__(self, nodes: list[ast.AST]):
        self.alias: dict[str, set[str]] = {}
        self.holds: dict[str, set[str]] = {}
        self.imported: set[str] = set()              # module paths named by `import a.b` (and a)
        self.functions: dict[str, list] = {}         # the file's own functions (a class: its __init__)
        self.classes: set[str] = set()
        self.starred: set[str] = set()               # names bound by `from m import *`
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    self.imported.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
                    self._add(self.alias, a.asname or parts[0], {a.name if a.asname else parts[0]})
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    names = _star_names(node.module) or () if a.name == "*" else [(a.asname or a.name, a.name)]
                    for bound, name in names:
                        self._add(self.alias, bound, {f"{node.module}.{name}"})
                        if a.name == "*":
                            self.starred.add(bound)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
                inits = [stmt for stmt in node.body
                         if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "__init__"]
                if inits:                              # without one, its arguments go to a base class
                    self.functions.setdefault(node.name, []).extend(inits)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.functions.setdefault(t.id, []).append(node.value)
        self._solve(list(self._collect(nodes)))

    @staticmethod
    def _add(table, name, paths) -> bool:
        if not paths:
            return False
        known = table.setdefault(name, set())
        before = len(known)
        known.update(paths)
        return len(known) != before

    def _collect(self, nodes):
        """(target, source, how): the target (a name or a slot) takes what the source (an
        expression or a slot) is ("is") or what it holds ("each")."""
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    yield from self._unpack(t, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                yield node.target.id, node.value, "each"      # xs += [m]: xs now holds m
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                for name in _names_in(node.target):
                    yield name, node.iter, "each"
            elif isinstance(node, ast.Match):
                for case in node.cases:
                    for name in _captures(case.pattern):
                        yield name, node.subject, "is"
                        yield name, node.subject, "each"
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        for name in _names_in(item.optional_vars):
                            yield name, item.context_expr, "is"
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Lambda):
                    yield from self._parameters(node.func, "(lambda)")
                    yield from self._call_site(node, "(lambda)")
                elif isinstance(node.func, ast.Name) and node.func.id in self.functions:
                    yield from self._call_site(node, node.func.id)
            if isinstance(node, _FUNCTION_SCOPES):
                yield from self._defaults(node.args)
        for name, defs in self.functions.items():
            for fn in defs:
                yield from self._parameters(fn, name)
                if name not in self.classes:
                    for result, yielded in _results(fn):
                        yield f"{name}->", result, "into" if yielded else "is"

    def _unpack(self, target, value):
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts) and not any(isinstance(e, ast.Starred) for e in target.elts):
            for t, v in zip(target.elts, value.elts):
                yield from self._unpack(t, v)
        elif isinstance(target, ast.Name):
            yield target.id, value, "is"
        else:
            for name in _names_in(target):
                yield name, value, "each"

    @staticmethod
    def _defaults(args: ast.arguments):
        positional = [*args.posonlyargs, *args.args]
        for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            yield a.arg, d, "is"
        for a, d in zip(args.kwonlyargs, args.kw_defaults):
            if d is not None:
                yield a.arg, d, "is"

    @staticmethod
    def _call_site(call: ast.Call, name: str):
        for i, value in enumerate(call.args):
            if isinstance(value, ast.Starred):
                yield f"{name}*", value.value, "each"
            else:
                yield f"{name}#{i}", value, "is"
                yield f"{name}*", value, "is"
        for kw in call.keywords:
            yield (f"{name}={kw.arg}", kw.value, "is") if kw.arg else (f"{name}*", kw.value, "each")
            yield f"{name}*", kw.value, "is"

    @staticmethod
    def _parameters(fn, name: str):
        args = fn.args
        positional = [*args.posonlyargs, *args.args]
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == "__init__":
            positional = positional[1:]                     # self
        for i, a in enumerate(positional):
            yield a.arg, f"{name}#{i}", "slot"
            yield a.arg, f"{name}={a.arg}", "slot"
        for a in args.kwonlyargs:
            yield a.arg, f"{name}={a.arg}", "slot"
        for a in [*positional, *args.kwonlyargs]:
            yield a.arg, f"{name}*", "slot"                 # unpacked arguments may land anywhere
        for a in [args.vararg, args.kwarg]:
            if a is not None:
                yield a.arg, f"{name}*", "gather"           # *args, **kwargs: containers of arguments

    def _solve(self, flows):
        """Apply the flows to a fixpoint with a work list: a flow runs again only when
        something it reads has grown, so the work is bounded by the growth, not by rounds."""
        readers: dict[str, list[int]] = {}
        for i, (_, source, _how) in enumerate(flows):
            for key in self._reads(source):
                readers.setdefault(key, []).append(i)
        queue = deque(range(len(flows)))
        queued = set(queue)
        while queue:
            i = queue.popleft()
            queued.discard(i)
            target, source, how = flows[i]
            if self._apply(target, source, how):
                for j in readers.get(target, ()):
                    if j not in queued:
                        queued.add(j)
                        queue.append(j)

    def _reads(self, source) -> set[str]:
        if isinstance(source, str):
            return {source}
        keys = set()
        for n in ast.walk(source):
            if isinstance(n, ast.Name):
                keys.add(n.id)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.functions:
                keys.add(f"{n.func.id}->")
        return keys

    def _apply(self, target: str, source, how: str) -> bool:
        if how == "slot":
            is_, holds = self.alias.get(source), self.holds.get(source)
        elif how == "gather":
            is_ = holds = self.alias.get(source, set()) | self.holds.get(source, set())
        elif how == "into":                           # a generator's yields: what its iterator holds
            is_, holds = set(), self.resolve(source) | self.contents(source)
        elif how == "is":
            is_, holds = self.resolve(source), self.contents(source)
        else:
            is_ = holds = self.contents(source)
        grew = self._add(self.alias, target, is_)
        return self._add(self.holds, target, holds) or grew

    # -- what an expression may be, and what it may contain
    def resolve(self, node) -> set[str]:
        if isinstance(node, ast.Name):
            return set(self.alias.get(node.id, ()))
        if isinstance(node, ast.Attribute):
            return {f"{p}.{node.attr}" for p in self.resolve(node.value)}
        if isinstance(node, ast.Subscript):
            return self.contents(node.value) | {p for p in self.resolve(node.value)
                                                if p not in self.imported and "." in p}
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            return set().union(*(self.resolve(p) for p in parts))
        if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.resolve(node.value)
        if isinstance(node, ast.Call):
            return self._call(node, want_contents=False)
        return set()

    def contents(self, node) -> set[str]:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return set().union(*(self.resolve(e) | self.contents(e) for e in node.elts))
        if isinstance(node, ast.Dict):
            return set().union(*(self.resolve(e) | self.contents(e) for e in [*node.keys, *node.values] if e))
        if isinstance(node, _COMPREHENSIONS):
            results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return set().union(*(self.resolve(e) | self.contents(e) for e in results))
        if isinstance(node, ast.Name):
            return set(self.holds.get(node.id, ()))
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            return self.contents(node.value)
        if isinstance(node, ast.BinOp):                # xs + [m], [m] * 3
            return self.contents(node.left) | self.contents(node.right)
        if isinstance(node, (ast.IfExp, ast.BoolOp)):
            parts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else node.values
            return set().union(*(self.contents(p) for p in parts))
        if isinstance(node, (ast.NamedExpr, ast.Starred, ast.Await)):
            return self.contents(node.value)
        if isinstance(node, ast.Call):
            return self._call(node, want_contents=True)
        return set()

    def _call(self, node: ast.Call, want_contents: bool) -> set[str]:
        func = node.func
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Lambda):
            return self.contents(func.body) if want_contents else self.resolve(func.body)
        if isinstance(func, ast.Name) and func.id in self.functions:
            return set((self.holds if want_contents else self.alias).get(f"{func.id}->", ()))
        if isinstance(func, ast.Name) and not node.keywords:
            if func.id in _ELEMENT_OF:                # next(it), max(xs): one of the elements
                return set().union(set(), *(self.contents(a) for a in arguments))
            if func.id in _CONTAINER_OF:              # list(xs), zip(xs, ys): a new container of them
                return set().union(set(), *(self.contents(a) | self.resolve(a) for a in arguments)) \
                    if want_contents else set()
        if isinstance(func, ast.Attribute):
            return self.contents(func.value)          # d.get("k"), xs.pop(): an element of a container
        return set()

    def tracks_arguments(self, call: ast.Call) -> bool:
        """Whether what a call's arguments stand for stays known: the file's own functions and
        the container builtins above follow them; the looking-only builtins keep nothing."""
        func = call.func
        if isinstance(func, ast.Lambda) or isinstance(func, ast.Name) and func.id in self.functions:
            return True
        return isinstance(func, ast.Name) and (
            func.id in _LOOKS_ONLY or func.id in _ELEMENT_OF | _CONTAINER_OF and not call.keywords)


def _names_in(target) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _captures(pattern) -> list[str]:
    """The names a `case` pattern binds."""
    names = []
    for n in ast.walk(pattern):
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            names.append(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            names.append(n.rest)
    return names


def _results(fn) -> list[tuple[ast.AST, bool]]:
    """The expressions a function of the file hands back (returns, a lambda's body), and
    whether each is yielded (a generator: calling it gives an iterator over them)."""
    if isinstance(fn, ast.Lambda):
        return [(fn.body, False)]
    found = []
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)) and node.value is not None:
            found.append((node.value, not isinstance(node, ast.Return)))
        stack.extend(ast.iter_child_nodes(node))
    return found


# ----------------------------------------------------------------------------- precheck

# Dunder names and attributes that only read harmless strings or call ordinary protocol methods.
_HARMLESS_DUNDER_NAMES = frozenset({"__name__", "__file__", "__doc__", "__debug__", "__annotations__",
                                    "__qualname__", "__module__", "__all__", "__version__", "__author__"})
_ASSIGNABLE_DUNDERS = frozenset({"__all__", "__version__", "__author__", "__doc__", "__slots__"})
_HARMLESS_DUNDER_ATTRS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__version__", "__len__",
                                    "__repr__", "__str__", "__module__", "__post_init__"})
# Attributes of frames, tracebacks, generators and code objects: a way to other modules' globals.
_FRAME_ATTRS = frozenset({"tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
                          "f_trace", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await",
                          "ag_frame", "ag_code", "ag_await", "co_code", "co_consts", "co_names", "func_globals",
                          "func_code"})
# Methods that change how the interpreter or numpy treat an object: a way to forge values.
_PROTOCOL_HOOKS = frozenset({
    "__array__", "__array_interface__", "__array_struct__", "__array_function__", "__array_ufunc__",
    "__array_wrap__", "__array_finalize__", "__array_priority__", "__float__", "__int__", "__index__",
    "__complex__", "__dlpack__", "__buffer__"})
_DEAD_NOTE = (" It is code that only the `if __name__ == \"__main__\":` block reaches, and grading never runs "
              "it, so this is only a warning.")
_DELETE = "Delete it (and the code that uses it)."


def precheck(source: str, filename: str, entry_points: Iterable[str] | None = None) -> list[Violation]:
    """Every finding in one kernel file, each once, sorted by line: severity "error" rejects
    the file, "warning" is only reported. An empty list means nothing was found.

    `entry_points`: the functions the grader calls (default: every problem's kernel). Findings
    in code that only the `__main__` block reaches are warnings."""
    tree, error = _parse(source, filename)
    if error:
        return [error]
    if entry_points is None:
        entry_points = _problem_kernels()
    try:
        return _Checker(tree, filename, frozenset(entry_points) if entry_points is not None else None).run()
    except RecursionError:
        return [Violation(0, "syntax", f"{filename} nests expressions too deeply to be checked; split the deepest "
                                       f"expression into several statements.")]


def _problem_kernels() -> frozenset[str] | None:
    try:
        from . import problems
    except ImportError:
        return None                                   # unknown: no function is taken for dead code
    return frozenset(p.kernel for p in problems.REGISTRY.values())


class _Checker:
    def __init__(self, tree: ast.Module, filename: str, entry_points: frozenset[str] | None):
        self.nodes, self.parent = _walk(tree)
        if any(isinstance(n, ast.Name) and n.id == "getattr" for n in self.nodes) \
                and not _binds(self.nodes, "getattr"):
            tree = _LiteralGetattr().visit(tree)
            self.nodes, self.parent = _walk(tree)
        self.tree = tree
        self.dead = set() if filename.rsplit("/", 1)[-1] == "__main__.py" else \
            _dead_code(tree, self.nodes, _main_block(tree), entry_points)
        self.scopes = _Scopes(tree)
        self.flow = _Flow(self.nodes)
        self.imported = frozenset(self.flow.imported)
        self.out: list[Violation] = []

    def add(self, node, rule: str, message: str, severity: str = "error"):
        if severity == "error" and id(node) in self.dead:
            severity, message = "warning", message + _DEAD_NOTE
        self.out.append(Violation(getattr(node, "lineno", 0), rule, message, severity))

    def run(self) -> list[Violation]:
        self.check_imports()
        for node in self.nodes:
            if isinstance(node, ast.Name):
                self.check_name(node)
            elif isinstance(node, ast.Attribute):
                self.check_attribute(node)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.check_subscript_store(node)
            elif isinstance(node, ast.Call):
                self.check_call(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _PROTOCOL_HOOKS:
                self.add(node, "dunder", f"defining {node.name} is not allowed: it changes how the interpreter "
                                         f"or numpy treat an object, a way to forge values. {_DELETE}")
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                self.check_stored_value(node)
        return sorted(set(self.out), key=lambda v: (v.line, v.severity, v.rule, v.message))

    # -- imports
    def check_imports(self):
        uses: dict[str, list[ast.Name]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                uses.setdefault(node.id, []).append(node)
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    shown = f"import {a.name}" + (f" as {a.asname}" if a.asname else "")
                    self.check_import(node, a.name, shown, uses.get(a.asname or a.name.split(".")[0], []))
            elif isinstance(node, ast.ImportFrom):
                shown = f"from {'.' * node.level}{node.module or ''} import"
                if node.level:
                    self.add(node, "import", f"`{shown} ...` is not allowed: a kernel file is graded on its own, "
                                             f"so it cannot import files beside it. Put the helper in this file.")
                    continue
                for a in node.names:
                    refused = _judge(node.module) if a.name == "*" else None
                    if refused:
                        self.add(node, "import", f"`{shown} *` is not allowed: {refused[0]}. {_DELETE}")
                        continue
                    if a.name == "*" and _star_names(node.module):
                        continue                      # each name it binds is judged where it is used
                    if a.name == "*":
                        self.add(node, "import", f"`{shown} *` is not allowed: a star import hides which names the "
                                                 f"kernel uses, so they cannot be checked. Import the module under "
                                                 f"an alias instead (`import {node.module} as ...`).")
                    else:
                        self.check_import(node, f"{node.module}.{a.name}",
                                          f"{shown} {a.name}" + (f" as {a.asname}" if a.asname else ""),
                                          uses.get(a.asname or a.name, []))

    def check_import(self, node, path: str, shown: str, uses: list[ast.Name]):
        dunders = [p for p in path.split(".") if _is_dunder(p) and p not in _HARMLESS_DUNDER_NAMES | {"__future__"}]
        if dunders:
            self.add(node, "dunder", f"`{shown}` is not allowed: {dunders[0]} is an interpreter internal. {_DELETE}")
            return
        refused = _judge(path)
        if refused:
            self.add(node, "import", f"`{shown}` is not allowed: {refused[0]}. {_DELETE}")
            return
        top = path.split(".")[0]
        live = [u for u in uses if id(u) not in self.dead]
        if _policy_of(top) is None:
            if live:
                self.add(node, "import", f"`{shown}` is not allowed: {top} is used (line {live[0].lineno}), and a "
                                         f"kernel file may use only numpy, math, neuronxcc.nki and harmless standard "
                                         f"modules (typing, dataclasses, functools, itertools, collections, "
                                         f"logging, time, ...). {_DELETE}")
            elif uses:
                self.add(node, "unused-import", f"`{shown}` is used only by code that grading never runs (the "
                                                f"`if __name__ == \"__main__\":` block and what only it calls).",
                         "warning")
            else:
                self.add(node, "unused-import", f"`{shown}` is never used; delete it.", "warning")
        elif top == "pdb":
            self.add(node, "debugger", f"`{shown}`: a debugging import; it is harmless, but delete it before "
                                       f"submitting.", "warning")
        elif not uses and top not in _TEMPLATE_MODULES:
            self.add(node, "unused-import", f"`{shown}` is never used; delete it.", "warning")

    # -- names
    def check_name(self, node: ast.Name):
        name = node.id
        if name in self.flow.starred and isinstance(node.ctx, ast.Load):
            self.judge_use(node)
        if name in _FORBIDDEN_BUILTINS and isinstance(node.ctx, ast.Load):
            if self.scopes.is_builtin(node):
                parent = self.parent.get(id(node))
                called = isinstance(parent, ast.Call) and parent.func is node
                what = f"call to {name}()" if called else f"reference to the built-in {name}"
                self.add(node, "forbidden-call", f"{what} is not allowed in a kernel file: "
                                                 f"{_FORBIDDEN_BUILTINS[name]}. {_DELETE}")
            return
        if not _is_dunder(name):
            return
        if isinstance(node.ctx, ast.Load) and name not in _HARMLESS_DUNDER_NAMES:
            self.add(node, "dunder", f"use of the name {name} is not allowed: it exposes interpreter internals "
                                     f"that can bypass these checks. {_DELETE}")
        elif not isinstance(node.ctx, ast.Load) and name not in _ASSIGNABLE_DUNDERS:
            self.add(node, "dunder", f"assigning to {name} is not allowed: it changes how the interpreter treats "
                                     f"this file. {_DELETE}")

    # -- attributes
    def check_attribute(self, node: ast.Attribute):
        attr, shown = node.attr, _src(node)
        if _is_dunder(attr):
            if attr not in _HARMLESS_DUNDER_ATTRS:
                self.add(node, "dunder", f"access to the attribute {attr} (`{shown}`) is not allowed: dunder "
                                         f"attributes expose interpreter internals that can bypass these checks. "
                                         f"{_DELETE}")
        elif attr in _FRAME_ATTRS:
            self.add(node, "internals", f"access to {attr} (`{shown}`) is not allowed: frames and code objects "
                                        f"reach other modules' globals. {_DELETE}")
        elif attr.startswith("_") and self.flow.resolve(node.value):
            self.add(node, "private", f"access to the private attribute {attr} (`{shown}`) is not allowed: it is "
                                      f"the internals of an imported module. Use its public names.")
        elif attr in ("tofile", "dump") and isinstance(node.ctx, ast.Load):
            self.add(node, "file-io", f"`{shown}` is not allowed: {_FILES}; a kernel returns its results only as "
                                      f"its output tensors. {_DELETE}")
        elif attr == "ctypes" and isinstance(node.ctx, ast.Load):
            self.add(node, "internals", f"`{shown}` is not allowed: an array's ctypes interface {_NATIVE[3:]}. "
                                        f"{_DELETE}")
        if isinstance(node.ctx, ast.Load):
            parent = self.parent.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                self.judge_use(node)
        else:
            self.check_patch(node)

    def judge_use(self, node):
        for path in sorted(self.flow.resolve(node)):
            refused = _judge(path)
            if refused:
                rule = "file-io" if refused[0].startswith(_FILES) else "module-use"
                self.add(node, rule, f"`{_src(node)}` is not allowed: {refused[0]}. {_DELETE}")
                return

    def check_patch(self, node: ast.Attribute):
        verb = "deleting" if isinstance(node.ctx, ast.Del) else "assigning to"
        owners = self.flow.resolve(node.value)
        if owners:
            self.add(node, "monkey-patch", f"{verb} `{_src(node)}` is not allowed: {_src(node.value)} comes from an "
                                           f"import ({sorted(owners)[0]}), and changing imported modules or their "
                                           f"objects can tamper with the grader. Use a name of your own.")
        elif isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == "type" and self.scopes.is_builtin(node.value.func):
            self.add(node, "monkey-patch", f"{verb} `{_src(node)}` is not allowed: it patches a class shared with "
                                           f"the simulator. Use a name of your own.")

    def check_subscript_store(self, node: ast.Subscript):
        owners = {p for p in self.flow.resolve(node.value) if not _is_module(p, self.imported)}
        if owners:
            self.add(node, "monkey-patch", f"changing `{_src(node)}` is not allowed: {_src(node.value)} belongs to "
                                           f"an imported module ({sorted(owners)[0]}), and changing it can tamper "
                                           f"with the grader. Copy it into a name of your own first.")

    # -- modules hidden in objects
    def modules_in(self, node) -> list[str]:
        return sorted(p for p in self.flow.resolve(node) | self.flow.contents(node) if _is_module(p, self.imported))

    def check_stored_value(self, node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        in_class = isinstance(self.parent.get(id(node)), ast.ClassDef)
        if not (in_class or any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets)):
            return
        modules = self.modules_in(node.value)
        if modules:
            self.add(node, "module-escape", f"storing the module {modules[0]} in a class or object (`{_src(node)}`) "
                                            f"is not allowed: it hides the module from these checks. Use the module "
                                            f"directly.")

    # -- calls
    def check_type_call(self, node: ast.Call):
        """type(x) may be compared, printed or asked for its name; handing the class on lets
        new objects of it be built (a file object from sys.stderr's, say), and type(name,
        bases, dict) builds a class whose methods these checks never saw defined."""
        if len(node.args) == 3:
            self.add(node, "internals", f"`{_src(node)}` is not allowed: it builds a class at run time. Write a "
                                        f"class statement instead.")
            return
        parent = self.parent.get(id(node))
        reads = isinstance(parent, _TYPE_READERS) or (
            isinstance(parent, ast.Attribute) and parent.attr in _HARMLESS_DUNDER_ATTRS) or (
            isinstance(parent, ast.Call) and node is not parent.func and isinstance(parent.func, ast.Name)
            and parent.func.id in _LOOKS_ONLY)
        if not reads:
            self.add(node, "internals", f"`{_src(node)}` is not allowed here: handing on an object's class lets "
                                        f"new objects of it be built (files among them). Compare it, print it or "
                                        f"use isinstance instead.")

    def check_call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "type" and self.scopes.is_builtin(func):
            self.check_type_call(node)
        for path in sorted(self.flow.resolve(func)):
            canonical = _canonical(path)
            if canonical == "pdb.set_trace":
                self.add(node, "debugger", f"`{_src(node)}` stops at a debugger prompt; graded runs have no "
                                           f"terminal, so the run ends there if it is reached. Delete it.", "warning")
            rule = _CALL_RULES.get(canonical)
            if rule:
                refused, why = rule
                given = {k.arg for k in node.keywords} | ({"args"} if node.args else set())
                if given & refused:
                    self.add(node, "forbidden-call", f"`{_src(node)}` is not allowed: {why}. Call it without "
                                                     f"{', '.join(sorted(given & refused))}.")
        if isinstance(func, ast.Attribute) and func.attr in ("format", "format_map") \
                and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
            hidden = _hidden_format_fields(func.value.value)
            if hidden:
                self.add(node, "dunder", f"the format field {{{hidden}}} is not allowed: it reads a dunder or "
                                         f"private attribute by name. {_DELETE}")
        refused_builtin = isinstance(func, ast.Name) and func.id in _FORBIDDEN_BUILTINS
        if not refused_builtin and not self.flow.tracks_arguments(node):
            for value in [*node.args, *(k.value for k in node.keywords)]:
                modules = self.modules_in(value)
                if modules:
                    self.add(value, "module-escape", f"passing the module {modules[0]} to `{_src(func)}` is not "
                                                     f"allowed: it hides the module from these checks. Use the "
                                                     f"module's functions directly.")
                    break


def _walk(tree):
    """Every node, breadth first like ast.walk, and each node's parent (by id)."""
    parent: dict[int, ast.AST] = {}
    nodes: list[ast.AST] = [tree]
    for node in nodes:
        for child in ast.iter_child_nodes(node):
            parent[id(child)] = node
            nodes.append(child)
    return nodes, parent


_TYPE_READERS = (ast.Compare, ast.FormattedValue, ast.JoinedStr)


def _canonical(path: str) -> str:
    """`logging.os.getcwd` -> `os.getcwd`: the path from the last module on it."""
    parts = path.split(".")
    module, i = parts[0], 1
    while i < len(parts):
        sub = _submodule(module, parts[i])
        if sub is None:
            break
        module, i = sub, i + 1
    return ".".join([module, *parts[i:]])


def _hidden_format_fields(text: str) -> str | None:
    """A str.format field that reads a dunder or private attribute (`{0.__globals__}`), if any."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return None
    for _, field, spec, _ in parsed:
        if field and any(part.startswith("_") for part in field.replace("[", ".").split(".")[1:]):
            return field
        nested = _hidden_format_fields(spec) if spec else None
        if nested:
            return nested
    return None


def _main_block(tree: ast.Module) -> set[int]:
    """Ids of every node inside the body of a top-level `if __name__ == "__main__":` (not its
    else branch): code that runs only when the file is run as a script, never when graded."""
    dead = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_test(stmt.test):
            for inner in stmt.body:
                dead.update(id(n) for n in ast.walk(inner))
    return dead


def _dead_code(tree: ast.Module, nodes, main_block: set[int], entry_points: frozenset[str] | None) -> set[int]:
    """The main block plus the bodies of top-level functions that only it calls (`def main():`
    called from the main block, and what only main calls). Not the grader's
    entry points, not decorated functions (a decorator may register them), not dunder-named
    ones (the interpreter calls those); decorators and defaults run when the def does, so
    only bodies count. With unknown entry points, only the main block is dead."""
    if entry_points is None:
        return set(main_block)
    bound_elsewhere = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} | \
        {a.asname or a.name.split(".")[0] for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    defs: dict[str, list] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.setdefault(stmt.name, []).append(stmt)
    candidates = {name: fns[0] for name, fns in defs.items()
                  if len(fns) == 1 and not isinstance(fns[0], ast.ClassDef) and not fns[0].decorator_list
                  and name not in entry_points and name not in bound_elsewhere and not _is_dunder(name)}
    body = {name: {id(n) for stmt in fn.body for n in ast.walk(stmt)} for name, fn in candidates.items()}
    loads: dict[str, list[ast.Name]] = {name: [] for name in candidates}
    for n in nodes:
        if isinstance(n, ast.Name) and n.id in loads:
            loads[n.id].append(n)
    dead_functions = set(candidates)
    while True:                                       # the greatest set whose users are all dead
        dead = set(main_block).union(*(body[name] for name in dead_functions))
        alive = {name for name in dead_functions if any(id(u) not in dead for u in loads[name])}
        if not alive:
            break
        dead_functions -= alive
    # Of those, only what the main block calls (directly or through each other): a function
    # nothing calls at all stays checked, since it has no reason to be there.
    reached, frontier = set(), [main_block]
    while frontier:
        ids = frontier.pop()
        for name in dead_functions - reached:
            if any(id(u) in ids for u in loads[name]):
                reached.add(name)
                frontier.append(body[name])
    return set(main_block).union(*(body[name] for name in reached))


def _is_main_test(test) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and \
        any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _binds(nodes, name: str) -> bool:
    for node in nodes:
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.arg) and node.arg == name:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in node.names):
            return True
    return False


class _LiteralGetattr(ast.NodeTransformer):
    """`getattr(x, "name")` is `x.name` (and `getattr(x, "name", d)` is about `x.name or d`), so
    it is judged like one; a computed or underscore name stays a refused getattr call."""

    def visit_Call(self, node):
        self.generic_visit(node)
        args = node.args
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and not node.keywords \
                and len(args) in (2, 3) and not any(isinstance(a, ast.Starred) for a in args) \
                and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str) \
                and args[1].value.isidentifier() and not args[1].value.startswith("_"):
            attr = ast.copy_location(ast.Attribute(args[0], args[1].value, ast.Load()), node)
            return ast.copy_location(ast.BoolOp(ast.Or(), [attr, args[2]]), node) if len(args) == 3 else attr
        return node


# ----------------------------------------------------------------------------- compute rules

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

"""What a kernel file may reach in each module: modules refused outright, and per-module
policies for the rest (numpy's public names, os.path's string functions, sys's constants,
...). A chain like `logging.os.system` is followed module by module, reading module
dictionaries only, so no module's own code runs while judging it."""
from __future__ import annotations

import importlib
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
from nkisim.dialects import CURRENT, DIALECTS, api_module_of, dialect_of_module

# ----------------------------------------------------------------------------- why things are refused

FILES = "it reads or writes files, and a kernel gets its data only from its arguments"
PROCESSES = "it reaches processes, threads or signals, which a kernel has no use for"
NETWORK = "it reaches the network, which a kernel has no use for"
INTERNALS = "it reaches interpreter internals (frames, code, the import system), which can bypass these checks"
RUNS_CODE = "it runs code from a string, which the checker cannot see"
REFLECT = "it reaches attributes by computed names, which bypasses these checks"
NATIVE = "it reaches native code or build tools, which a kernel has no use for"
GRADER = "it is the grader's or the simulator's own code, which a kernel must not touch"

# Modules a kernel file may not even import (a name or any of its submodules).
DENIED_MODULES = {
    **dict.fromkeys(("io", "pathlib", "shutil", "tempfile", "glob", "fileinput", "linecache", "tarfile",
                     "zipfile", "gzip", "bz2", "lzma", "shelve", "dbm", "sqlite3", "mmap", "filecmp",
                     "codecs", "pickle", "cPickle", "_pickle", "marshal", "copyreg"), FILES),
    **dict.fromkeys(("subprocess", "multiprocessing", "threading", "_thread", "concurrent", "asyncio",
                     "signal", "pty", "posix", "nt", "resource", "faulthandler", "webbrowser", "antigravity",
                     "platform", "getpass", "pwd", "grp", "spwd", "crypt", "termios", "tty", "fcntl",
                     "select", "selectors", "sched"), PROCESSES),
    **dict.fromkeys(("socket", "ssl", "http", "urllib", "urllib3", "requests", "ftplib", "smtplib",
                     "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver"), NETWORK),
    **dict.fromkeys(("builtins", "__builtin__", "importlib", "imp", "pkgutil", "zipimport", "runpy", "inspect",
                     "gc", "dis", "symtable", "tracemalloc", "trace", "site", "sysconfig", "unittest.mock",
                     "bdb", "cProfile", "profile", "pstats"), INTERNALS),
    **dict.fromkeys(("code", "codeop", "timeit", "doctest"), RUNS_CODE),
    **dict.fromkeys(("ctypes", "cffi", "distutils", "setuptools", "pip", "numba", "cython", "Cython"), NATIVE),
    **dict.fromkeys(("nkisim", "grader", "reference_kernels", "student_template", "workers", "web", "store",
                     "tests"), GRADER),
    **{"numpy.ctypeslib": NATIVE, "numpy.f2py": NATIVE, "numpy.distutils": NATIVE,
       "numpy.lib.format": FILES, "numpy.lib.npyio": FILES, "numpy.lib._npyio_impl": FILES,
       "numpy.lib._datasource": FILES, "numpy.lib.utils": INTERNALS, "numpy.lib.introspect": INTERNALS,
       "numpy.ma": FILES + " (numpy.ma.load/dump unpickle files)", "numpy.rec": FILES + " (numpy.rec.fromfile)",
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
        return FILES
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
                     "add_docstring", "add_newdoc_ufunc", "set_string_function"), INTERNALS),
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

# What NKI 0.6's own package offers a kernel: nki.jit and nki.simulate (all its top level
# documents) and its API modules; the rest of the package is the compiler's (or the simulator's)
_NKI_NAMES = frozenset({"jit", "simulate"} | {m.rpartition(".")[2] for m in CURRENT.modules if m != CURRENT.package})

POLICIES: dict[str, _Policy] = {
    "neuronxcc": _Policy(lambda chain: None if chain[0] == "nki" else
                         "only neuronxcc.nki is the NKI API; the rest of neuronx-cc is the compiler's internals",
                         walks=True),
    CURRENT.package: _Policy(lambda chain: None if chain[0] in _NKI_NAMES else
                             "of nki a kernel may use nki.jit, nki.simulate and the modules nki.language, nki.isa "
                             "and nki.typing; the rest of the package is the compiler's internals", walks=True),
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
    "typing": _open({"get_type_hints": RUNS_CODE + " (string annotations are evaluated)",
                     "ForwardRef": RUNS_CODE, "evaluate_forward_ref": RUNS_CODE}),
    "operator": _open({"attrgetter": REFLECT, "methodcaller": REFLECT}),
    "warnings": _open({"warn_explicit": "it loads module source through loaders, which a kernel has no use for"}),
    "logging": _open({"FileHandler": FILES, "handlers": FILES + " or sockets", "config": FILES + " or sockets",
                      "currentframe": INTERNALS}),
    "string": _open({"Formatter": REFLECT + " (Formatter.get_field hands back the objects it names)"}),
    "numpy.lib.stride_tricks": _open({"as_strided": "it reads and writes raw memory outside the array, which can "
                                                    "corrupt the interpreter (sliding_window_view is the safe form)"}),
    "argparse": _open({"FileType": FILES}),
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
TEMPLATE_MODULES = ("numpy", "neuronxcc", CURRENT.package, "__future__")   # the starter files' own imports: never warned

# Calls checked by their arguments: canonical path -> (keywords or "args" that are refused, why).
CALL_RULES = {
    "logging.basicConfig": ({"filename", "filemode"}, FILES),
    "argparse.ArgumentParser": ({"fromfile_prefix_chars"}, FILES),
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


# The NKI modules whose every public attribute is the API: the whole legacy package (its parent,
# neuronxcc, is the compiler), and NKI 0.6's language, isa and typing (their package, nki, is
# judged by its policy above, as neuronxcc is).
_API_ROOTS = tuple(m for d in DIALECTS.values() for m in d.modules if m != CURRENT.package)


def policy_of(module: str) -> _Policy | None:
    if any(module == root or module.startswith(root + ".") for root in _API_ROOTS):
        return _open()
    return POLICIES.get(module)


# Module objects known without importing anything: numpy's lazily loaded submodules and NKI's.
_STATIC_MODULES = frozenset(
    [f"numpy.{m}" for m in _NUMPY_SUBMODULES | {"core", "_core", "ctypeslib", "f2py", "distutils", "ma", "rec",
                                                "matlib", "version"}]
    + [m for d in DIALECTS.values() for m in d.modules])
# What stands in for each dialect's modules when the simulator's facade is looked into
# ("nki.isa" -> "nkisim.nki06.isa"), and back.
_FACADE_MODULES = frozenset(d.facade_of(m) for d in DIALECTS.values() for m in d.modules)


def _loaded(module: str):
    """The module object to look into, without running any of its code: NKI's through the
    simulator's facade, numpy's only when already imported, standard ones from POLICIES."""
    try:
        dialect = dialect_of_module(module)
        if dialect is not None:
            facade = dialect.facade_of(module)
            return importlib.import_module(facade) if facade in _FACADE_MODULES else None
        if module.split(".")[0] == "numpy":
            return sys.modules.get(module)
        if module in POLICIES or module.split(".")[0] in POLICIES:
            return importlib.import_module(module)
    except ImportError:
        return None
    return None


@lru_cache(maxsize=4096)
def submodule(module: str, attr: str) -> str | None:
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
    return api_module_of(name) or name


@lru_cache(maxsize=4096)
def judge(path: str) -> tuple[str, str] | None:
    """Why reaching `path` (a dotted name from an import) is refused, as (reason, module), or None."""
    parts = path.split(".")
    module, rest = parts[0], parts[1:]
    while True:
        reason = _denied(module)
        if reason:
            return reason, module
        policy = policy_of(module)
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
        sub = submodule(module, rest[0]) if policy.walks else None
        if sub is None:
            return None
        module, rest = sub, rest[1:]


# Module-level containers a kernel may still change (sys.path.append is documented harmless).
CHANGEABLE = frozenset({"sys.path"})


def mutable_module_value(path: str) -> bool:
    """Whether `path` is a module's own dict, list, set or namespace (`np.sctypeDict`): calling
    update/append/... on it patches the module as surely as assigning to it."""
    module, _, attr = path.rpartition(".")
    if not module or path in CHANGEABLE:
        return False
    parts = module.split(".")
    canonical = parts[0]
    for part in parts[1:]:
        canonical = submodule(canonical, part)
        if canonical is None:
            return False
    owner = _loaded(canonical)
    value = vars(owner).get(attr) if owner is not None else None
    return isinstance(value, (dict, list, set, bytearray, types.SimpleNamespace))


def star_names(module: str) -> list[tuple[str, str]] | None:
    """The names `from module import *` binds, as (bound, name) pairs, when they can be known."""
    owner = _loaded(module)
    if owner is None:
        return None
    names = vars(owner).get("__all__")
    if not isinstance(names, (list, tuple)):
        names = [n for n in vars(owner) if not n.startswith("_")]
    return [(n, n) for n in names if isinstance(n, str)]


def is_module(path: str, imported: frozenset[str]) -> bool:
    """Whether `path` names a module object (a name from `import x.y`, or a submodule of one)."""
    parts = path.split(".")
    if parts[0] not in imported:
        return False
    module = parts[0]
    for i in range(1, len(parts)):
        prefix = ".".join(parts[:i + 1])
        module = prefix if prefix in imported else submodule(module, parts[i])
        if module is None:
            return False
    return True

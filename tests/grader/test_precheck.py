"""Static precheck of kernel source. Two sides, both required: every attack form is rejected
(severity "error"), and real-looking kernels never are: the reference kernels, the starter
files and the corpus in precheck_corpus/good (grow it with every real file that was refused
wrongly; precheck_corpus/bad holds whole attack files, first line `# expect: <rule>`). The
part-1 compute rule (compute_violations) is tested at the end."""
import ast
import textwrap
from pathlib import Path

import pytest

from grader.precheck import Violation, compute_violations, precheck

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "precheck_corpus" / "good"
GOOD_FILES = sorted(CORPUS.glob("*.py")) + sorted((ROOT / "reference_kernels").glob("*.py")) + \
    sorted((ROOT / "student_template").glob("*.py"))

HEADER = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
"""
FIRST = HEADER.count("\n") + 1           # the line of a snippet's first line


def check(snippet: str, filename: str = "conv2d.py") -> list[Violation]:
    """The snippet's findings, with every function it defines taken as called by the grader
    (so no function body counts as dead code)."""
    source = HEADER + textwrap.dedent(snippet)
    functions = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return precheck(source, filename, entry_points=functions)


def errors(snippet: str) -> list[Violation]:
    return [v for v in check(snippet) if v.severity == "error"]


def error_rules(snippet: str) -> set[str]:
    return {v.rule for v in errors(snippet)}


def warnings_of(snippet: str) -> list[Violation]:
    return [v for v in check(snippet) if v.severity == "warning"]


# ----------------------------------------------------------------------------- good kernels pass

def test_the_corpus_is_big_enough():
    assert len(list(CORPUS.glob("*.py"))) >= 12


@pytest.mark.parametrize("path", GOOD_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_good_kernels_have_no_error(path):
    source = path.read_text()
    found = precheck(source, path.name)
    assert [v for v in found if v.severity == "error"] == []
    assert all(v.severity == "warning" for v in found)


NOT_KERNELS = {"demo.py"}       # reference_kernels/demo.py composes the `nkisim` command: no kernel file


@pytest.mark.parametrize("path", [p for p in sorted((ROOT / "reference_kernels").glob("*.py")) if p.name not in NOT_KERNELS]
                         + sorted((ROOT / "student_template").glob("*.py")), ids=lambda p: p.name)
def test_our_own_kernels_and_starter_files_have_nothing_at_all(path):
    assert precheck(path.read_text(), path.name) == []


def test_warnings_in_the_corpus_are_the_expected_ones():
    found = precheck((CORPUS / "conv2d_main_debugger_leftovers.py").read_text(), "conv2d.py")
    assert all(v.severity == "warning" for v in found)
    assert {v.rule for v in found} == {"debugger", "forbidden-call", "module-use", "file-io"}
    assert all("grading never runs" in v.message for v in found if v.rule != "debugger")


BAD_FILES = sorted((CORPUS.parent / "bad").glob("*.py"))


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda p: p.name)
def test_attack_files_are_rejected_for_the_expected_reason(path):
    source = path.read_text()
    expected = source.splitlines()[0].removeprefix("# expect: ").strip()
    assert expected in {v.rule for v in precheck(source, "conv2d.py") if v.severity == "error"}


# ----------------------------------------------------------------------------- results

def test_violation_is_a_frozen_dataclass_with_a_severity():
    v = Violation(3, "import", "`import subprocess` is not allowed.")
    assert (v.line, v.rule, v.severity) == (3, "import", "error")
    assert Violation(1, "unused-import", "x", "warning").severity == "warning"
    with pytest.raises(AttributeError):
        v.line = 4


def test_unparsable_source_is_a_violation_not_an_exception():
    found = precheck("def f(:\n", "conv2d.py")
    assert [(v.rule, v.line, v.severity) for v in found] == [("syntax", 1, "error")]
    assert "conv2d.py does not parse" in found[0].message


def test_too_deep_to_check_is_an_error_not_a_crash():
    found = precheck("import numpy as np\nx = np" + ".a" * 50000 + "\n", "conv2d.py")
    assert [v.rule for v in found] == ["syntax"] and found[0].severity == "error"


def test_self_referential_aliases_end():
    found = check("x = nl\nfor _ in range(3):\n    x = x.a if x else x.b\n    x = x.c\nx.d.e = 1\n")
    assert [v.rule for v in found] == ["monkey-patch"]


def test_every_violation_is_listed_once_sorted_by_line():
    found = check("""
        import subprocess
        x = eval("1")
        import pdb
        y = eval("1"); z = eval("2")
    """)
    assert [v.line for v in found] == sorted(v.line for v in found)
    assert [(v.line - FIRST, v.rule, v.severity) for v in found] == [
        (1, "import", "error"), (2, "forbidden-call", "error"), (3, "debugger", "warning"),
        (4, "forbidden-call", "error")]     # two eval calls on one line: one finding


# ----------------------------------------------------------------------------- imports

@pytest.mark.parametrize("line", [
    "import numpy as np", "import math", "from math import ceil, prod", "import neuronxcc.nki as nki",
    "import neuronxcc.nki.language as nl", "from neuronxcc import nki", "from neuronxcc.nki.isa import nc_transpose",
    "from neuronxcc.nki.typing import tensor", "from numpy import float32, testing", "from numpy import __version__",
    "import numpy.random as npr", "from numpy.lib.stride_tricks import sliding_window_view",
    "from __future__ import annotations", "import typing", "from dataclasses import dataclass",
    "import functools, itertools, collections", "import logging", "import time", "import warnings",
    "import os", "import sys", "import os.path", "from os import path", "import unittest", "import json",
])
def test_imports_that_are_fine_even_when_unused(line):
    assert [v for v in precheck(line + "\n", "k.py") if v.severity == "error"] == []


@pytest.mark.parametrize("module", ["pdb", "sys", "os", "logging", "time", "typing", "functools", "itertools",
                                    "math", "warnings", "dataclasses", "unittest"])
def test_an_unused_or_debugging_import_is_a_warning(module):
    found = precheck(f"import {module}\n", "conv2d.py")
    assert len(found) == 1 and found[0].severity == "warning" and found[0].line == 1
    assert found[0].rule == ("debugger" if module == "pdb" else "unused-import")


def test_the_starter_imports_are_not_nagged_about():
    assert precheck(HEADER, "conv2d.py") == []


@pytest.mark.parametrize("line", [
    "import subprocess", "import socket", "import ctypes", "import importlib", "import importlib.util",
    "import pickle", "import shutil", "import pathlib", "import io", "import builtins", "import gc", "import inspect",
    "import threading", "import multiprocessing", "import signal", "from subprocess import run as go",
    "import nkisim", "from nkisim import trace", "import grader.sandbox", "import reference_kernels",
    "import neuronxcc.starfish", "from neuronxcc import starfish", "import numpy.ctypeslib", "import numpy.f2py",
    "from numpy import ctypeslib", "import numpy.lib.format", "from numpy.lib import npyio", "from numpy import load",
    "from os import system", "from os import popen as p", "from sys import modules", "import logging.handlers",
    "from logging import FileHandler", "from unittest import mock", "import unittest.mock", "from pdb import run",
    "from operator import attrgetter", "from typing import get_type_hints", "from numpy.testing import runstring",
])
def test_imports_that_reach_files_processes_network_or_internals(line):
    found = precheck(line + "\n", "k.py")
    assert [(v.rule, v.severity) for v in found] == [("import", "error")], found
    assert found[0].message.startswith(f"`{line}` is not allowed: ")


def test_an_unknown_module_is_refused_only_when_the_kernel_uses_it():
    assert [(v.rule, v.severity) for v in precheck("import torch\n", "k.py")] == [("unused-import", "warning")]
    found = precheck("import torch\nx = torch.zeros(3)\n", "k.py")
    assert [(v.rule, v.severity, v.line) for v in found] == [("import", "error", 1)]
    assert "torch is used (line 2)" in found[0].message


@pytest.mark.parametrize("line", ["from . import helpers", "from .helpers import tile"])
def test_relative_import(line):
    assert [(v.rule, v.severity) for v in precheck(line + "\n", "k.py")] == [("import", "error")]


def test_a_star_import_binds_names_that_are_judged_where_used():
    assert precheck("from numpy import *\nfrom math import *\nx = zeros(3) + ceil(2.5)\n", "k.py") == []
    found = precheck("from numpy import *\nx = load('f')\n", "k.py")
    assert [(v.rule, v.line) for v in found] == [("file-io", 2)]
    found = precheck("from neuronxcc.nki.language import *\ntile_size.pmax = 256\n", "k.py")
    assert [(v.rule, v.line) for v in found] == [("monkey-patch", 2)]


@pytest.mark.parametrize("line,why", [("from torch import *", "star import"),
                                      ("from subprocess import *", "processes")])
def test_a_star_import_whose_names_are_unknown_or_denied(line, why):
    found = precheck(line + "\n", "k.py")
    assert [v.rule for v in found] == ["import"] and why in found[0].message


def test_import_inside_a_function_is_checked_too():
    (v,) = errors("""
        def kernel(x):
            import subprocess
            return subprocess
    """)
    assert (v.rule, v.line) == ("import", FIRST + 2)


# ----------------------------------------------------------------------------- builtins

@pytest.mark.parametrize("name", ["open", "exec", "eval", "compile", "__import__", "breakpoint", "globals",
                                  "locals", "vars", "setattr", "delattr", "input", "help"])
def test_forbidden_builtin_calls(name):
    (v,) = check(f"r = {name}('x')\n")
    assert (v.rule, v.line, v.severity) == ("forbidden-call", FIRST, "error")
    assert v.message.startswith(f"call to {name}() is not allowed")


def test_default_argument_binding_of_builtins_is_caught():
    found = check("""
        def f(exec=exec, __import__=__import__, *, opener=open):
            return exec("1"), __import__("os"), opener("x")
    """)
    assert sorted((v.rule, v.message.split(" is ")[0]) for v in found) == [
        ("forbidden-call", "reference to the built-in __import__"), ("forbidden-call", "reference to the built-in exec"),
        ("forbidden-call", "reference to the built-in open")]


@pytest.mark.parametrize("snippet", [
    "exec = exec\nexec('1')\n",                                   # rebinding at module level
    "x = exec\n",                                                 # aliasing without calling
    "if False:\n    exec = None\nexec('1')\n",                    # a conditional binding proves nothing
    "def run():\n    return exec('1')\ndef exec(s):\n    pass\n",  # bound only after its user
    "def f():\n    global exec\n    del exec\nexec = print\nexec('1')\n",
    "class K:\n    eval = 1\n    def m(self):\n        return eval('1')\n",   # methods do not see class scope
    "def f():\n    [0 for exec in []]\n    return exec('1')\n",   # comprehension variables stay inside it
    "g = lambda f=compile: f('1', 'x', 'exec')\n",
    "ns = locals()\n",                                            # at module level it is globals()
    "class K:\n    ns = locals()\n",
    "def f():\n    get = locals\n    return get\n",
])
def test_forbidden_builtins_reached_by_scope_tricks(snippet):
    assert "forbidden-call" in error_rules(snippet)


@pytest.mark.parametrize("snippet", [
    "def kernel(input, vars=None):\n    return input[0]\n",
    "def kernel(x):\n    open = nl.load\n    return open(x)\n",
    "def compile_plan(n):\n    return n\ndef kernel(x):\n    return compile_plan(x)\n",
    "def eval_tile(t):\n    return t\ndef kernel(x):\n    return eval_tile(x)\n",
    "def f(x):\n    [input for input in range(3)]\n    return x\n",
    "y = x.compile\nz = pattern.input\n",
    "print('debug', nl.tile_size.pmax, flush=True)\n",
    "def kernel(x):\n    tile = nl.load(x)\n    print(locals())\n    return tile\n",
])
def test_names_that_only_look_like_builtins_are_fine(snippet):
    assert errors(snippet) == []


def test_getattr_with_a_literal_name_is_an_attribute():
    assert errors("dt = getattr(nl, 'float32')\nop = getattr(nl, 'maximum', nl.add)\n") == []
    assert "module-use" in error_rules("f = getattr(np.testing, 'runstring')\n")
    assert error_rules("g = getattr(x, '__globals__')\n") == {"forbidden-call"}
    assert error_rules("name = 'float32'\ndt = getattr(nl, name)\n") == {"forbidden-call"}


# ----------------------------------------------------------------------------- dunders and frames

@pytest.mark.parametrize("snippet,what", [
    ("c = x.__class__\n", "__class__"),
    ("g = f.__globals__\n", "__globals__"),
    ("b = ().__class__.__bases__[0].__subclasses__()\n", "__subclasses__"),
    ("d = nl.__dict__\n", "__dict__"),
    ("c = f.__code__\n", "__code__"),
    ("b = __builtins__\n", "__builtins__"),
    ("s = __spec__.loader\n", "__spec__"),
    ("__name__ = '__main__'\n", "__name__"),
    ("s = '{0.__globals__}'.format(f)\n", "__globals__"),
    ("s = 'x{t:{f.__class__}}'.format(t=1, f=f)\n", "__class__"),
    ("class Fake:\n    def __float__(self):\n        return 0.0\n", "__float__"),
    ("class Fake:\n    def __array__(self, dtype=None):\n        return None\n", "__array__"),
    ("class Fake:\n    __array_priority__ = 1000\n", "__array_priority__"),
])
def test_dunder_access(snippet, what):
    found = errors(snippet)
    assert found and {v.rule for v in found} == {"dunder"}
    assert any(what in v.message for v in found)


@pytest.mark.parametrize("snippet", [
    "if __name__ == '__main__':\n    print('run me')\n",
    "print(__name__, __file__, kernel.__name__, __doc__)\n",
    "__all__ = ['kernel']\n__version__ = '1.0'\n",
    "class A:\n    def __init__(self):\n        super().__init__()\n    def __repr__(self):\n        return 'A'\n",
    "s = '{0.shape} {1[0]}'.format(t, xs)\n",
])
def test_harmless_dunders_are_fine(snippet):
    assert errors(snippet) == []


@pytest.mark.parametrize("snippet", [
    "g = (i for i in [])\nframe = g.gi_frame.f_back\n",
    "try:\n    1 / 0\nexcept Exception as e:\n    tb = sys_info[2].tb_frame.f_globals\n",
    "code = f.co_code\n",
])
def test_frame_and_code_attributes(snippet):
    assert error_rules(snippet) == {"internals"}


# ----------------------------------------------------------------------------- modules reaching too far

@pytest.mark.parametrize("snippet", [
    "np.testing.runstring('print(1)', {})\n",
    "np.testing.measure('x = 1')\n",
    "from numpy import testing as t\nt.runstring('x', {})\n",
    "u = np.lib.utils\n",
    "f = np.f2py.compile\n",
    "d = np.distutils\n",
    "c = np.ctypeslib.as_ctypes(x)\n",
    "m = np.core.multiarray\n",
    "r = np.rec.fromfile('f')\n",
    "tester = np.test\n",
    "n = np\nn.testing.runstring('x', {})\n",
    "def helper(mod=np):\n    return mod.testing.runstring('x', {})\n",
    "def helper(mod):\n    return mod.testing.measure('x')\nhelper(np)\n",
])
def test_numpy_escape_hatches_that_run_source_or_reach_native_code(snippet):
    assert error_rules(snippet) & {"module-use", "import", "file-io"}


@pytest.mark.parametrize("snippet", [
    "ref = np.load('/grader/ref.npy', allow_pickle=True)\n",
    "np.save('out.npy', x)\n",
    "np.savez_compressed('out.npz', a=x)\n",
    "m = np.memmap('f', dtype=np.float32)\n",
    "x = np.fromfile('f')\n",
    "d = np.DataSource('/')\n",
    "t = np.loadtxt('f')\n",
    "arr.tofile('out.bin')\n",
    "arr.dump('out.pkl')\n",
    "alias = np\nalias.load('f')\n",
])
def test_numpy_file_io(snippet):
    assert error_rules(snippet) == {"file-io"}


@pytest.mark.parametrize("snippet", [
    "x = np.zeros((4, 4), dtype=np.float32)\n",
    "ok = np.allclose(a, b) and np.isclose(a, b).all()\n",
    "n = np.dtype(t.dtype).itemsize + np.finfo(np.float16).max + np.iinfo(np.int32).bits\n",
    "v = np.float32(1.5) * np.pi + np.inf\n",
    "nisa.dma_copy(dst=t, src=s, dst_rmw_op=np.add)\n",
    "r = nisa.tensor_tensor(a, b, op=np.maximum)\n",
    "w = np.lib.stride_tricks.sliding_window_view(x, (3, 3))\n",
    "e = np.einsum('ij,jk->ik', a, b)\np = np.pad(a, 1)\n",
    "g = np.random.default_rng(0).standard_normal(4)\nnp.random.seed(0)\n",
    "np.testing.assert_allclose(a, b, rtol=1e-4)\n",
    "np.set_printoptions(precision=3, suppress=True)\n",
    "with np.errstate(divide='ignore'):\n    q = a / b\n",
    "x = np.float_(1.0)\n",                                       # numpy 1 only: fails at run time, harmlessly
    "s = np.linalg.norm(a) + np.fft.fft(a).real.sum()\n",
    "nl.load(src)\n",
])
def test_what_kernels_use_from_numpy_is_fine(snippet):
    assert errors(snippet) == []


@pytest.mark.parametrize("snippet,rule", [
    ("import os\nos.system('ls')\n", "module-use"),
    ("import os\nos.popen('ls')\n", "module-use"),
    ("import os\nnames = os.listdir('/')\n", "module-use"),
    ("import os\nok = os.path.exists('/etc')\n", "module-use"),
    ("import os\nos.environ.update(LD_PRELOAD='x')\n", "module-use"),
    ("import os\nos.environ['NEURON_RT_VISIBLE_CORES'] = '3'\n", "monkey-patch"),
    ("import sys\nm = sys.modules['os']\n", "module-use"),
    ("import sys\nsys.settrace(None)\n", "module-use"),
    ("import sys\nf = sys._getframe(1)\n", "private"),
    ("import sys\nx = sys.exc_info()\n", "module-use"),
    ("import logging\nlogging.os.system('ls')\n", "module-use"),
    ("import logging\nh = logging.FileHandler('x.log')\n", "file-io"),
    ("import logging\nlogging.basicConfig(filename='x.log')\n", "forbidden-call"),
    ("import logging\nlogging.config.listen(9000)\n", "file-io"),
    ("import dataclasses\ndataclasses.builtins.exec('1')\n", "module-use"),
    ("import typing\nm = typing.sys.modules\n", "module-use"),
    ("import typing\nh = typing.get_type_hints(f)\n", "module-use"),
    ("import operator\ng = operator.attrgetter('__globals__')\n", "module-use"),
    ("import traceback\ns = traceback.walk_stack(None)\n", "module-use"),
    ("import pdb\npdb.run('import os')\n", "module-use"),
    ("import unittest\nunittest.main(module='os')\n", "forbidden-call"),
    ("import argparse\np = argparse.ArgumentParser(fromfile_prefix_chars='@')\n", "forbidden-call"),
    ("import types\nf = types.FunctionType(code, {})\n", "module-use"),
    ("import random\nr = random._os\n", "private"),
    ("import logging\nf = logging.currentframe()\n", "module-use"),
    ("import string\nobj = string.Formatter().get_field('0.x', [f], {})\n", "module-use"),
    ("w = np.lib.stride_tricks.as_strided(a, (10,), (8,))\n", "module-use"),
    ("import unittest\nunittest.TestLoader().loadTestsFromName('os.fork')\n", "module-use"),
    ("p = arr.ctypes.data\n", "internals"),
    ("import sys\nraw = sys.stdout.buffer.raw\n", "module-use"),
    ("import logging\nfile_type = type(logging.StreamHandler().stream)\n", "internals"),
    ("f = type(stream)(3, 'w')\n", "internals"),
    ("Fake = type('Fake', (), {'__float__': lambda self: 0.0})\n", "internals"),
])
def test_the_harmful_corners_of_harmless_modules(snippet, rule):
    assert rule in error_rules(snippet)


@pytest.mark.parametrize("snippet", [
    "import logging\nlogging.disable(logging.OFF)\n",
    "import logging\nlogging.getLogger(__name__).setLevel(logging.INFO)\nlog = logging.getLogger('k')\nlog.debug('x')\n",
    "import logging\nlogging.basicConfig(level=logging.DEBUG, format='%(message)s')\n",
    "import os\np = os.path.join(os.path.dirname(__file__), 'x')\nd = os.environ.get('DEBUG')\nn = os.cpu_count()\n",
    "import os, sys\nsys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))\n",
    "class AttrDict(dict):\n    def __getattr__(self, k):\n        return self[k]\n    def __eq__(self, o):\n        return True\n",
    "import sys\nsys.path.append('..')\nprint(sys.version_info >= (3, 8), sys.maxsize, file=sys.stderr)\n",
    "import time\nt0 = time.perf_counter()\n",
    "import pdb\npdb.set_trace()\n",
    "import traceback\ntry:\n    pass\nexcept Exception:\n    traceback.print_exc()\n",
    "import math, functools, itertools\nn = math.ceil(functools.reduce(max, itertools.chain([1], [2])) / 2)\n",
    "from typing import List, Optional, Tuple\ndef f(x: List[int]) -> Optional[Tuple[int, int]]:\n    return None\n",
    "from dataclasses import dataclass, field\n@dataclass\nclass Cfg:\n    rows: int = 4\n    names: list = field(default_factory=list)\n",
    "import unittest\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(1, 1)\n",
    "import warnings\nwarnings.warn('slow path')\n",
])
def test_ordinary_uses_of_standard_modules_are_fine(snippet):
    assert errors(snippet) == []


def test_pdb_set_trace_is_a_warning():
    found = check("import pdb\ndef kernel(x):\n    pdb.set_trace()\n    return x\n")
    assert [(v.rule, v.severity, v.line - FIRST) for v in found] == [("debugger", "warning", 0),
                                                                       ("debugger", "warning", 2)]


# ----------------------------------------------------------------------------- monkey-patching

@pytest.mark.parametrize("snippet", [
    "np.allclose = lambda a, b, **k: True\n",
    "nki.benchmark = my_benchmark\n",
    "nl.tile_size.pmax = 256\n",
    "np.random.seed = None\n",
    "np.testing.x += 1\n",
    "del np.allclose\n",
    "nl.tile_size.extra: int = 3\n",
    "np.allclose, y = f, 2\n",
    "for nki.jit in [f]:\n    pass\n",
    "from numpy import testing\ntesting.assert_allclose = f\n",
    "from neuronxcc.nki import baremetal\nbaremetal.cache = {}\n",
    "import neuronxcc.nki\nneuronxcc.nki.benchmark = f\n",
    "n = np\nn.allclose = f\n",
    "t = nl.tile_size\nt.pmax = 256\n",
    "def install(m):\n    m.baremetal = fake\ninstall(nki)\n",
    "def install(m, *, also):\n    also.benchmark = fake\ninstall(None, also=nki)\n",
    "def install(*mods):\n    for m in mods:\n        m.baremetal = fake\ninstall(nl, nki)\n",
    "def pick():\n    return nki\npick().baremetal = fake\n",
    "def pick():\n    yield nki\nnext(pick()).baremetal = fake\n",
    "(lambda m: setattr_free(m))(nki)\n(lambda: nki)().baremetal = fake\n",
    "mods = [nki, nl]\nmods[0].baremetal = fake\n",
    "mods = {'k': nki}\nmods.get('k').baremetal = fake\n",
    "for m in (nki,):\n    m.baremetal = fake\n",
    "m = next(iter([nki]))\nm.baremetal = fake\n",
    "m = nki if cond else nl\nm.baremetal = fake\n",
    "(m := nki).baremetal = fake\n",
    "def f():\n    global m\n    m = nki\ndef g():\n    m.baremetal = fake\n",
    "def outer():\n    m = nki\n    def inner():\n        m.baremetal = fake\n    return inner\n",
    "class C:\n    m = nki\n    m.baremetal = fake\n",
    "t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)\ntype(t).reshape = fake\n",
    "mods = []\nmods += [nki]\nmods[0].baremetal = fake\n",
    "mods = []\n(mods + [nki])[0].baremetal = fake\n",
    "match nki:\n    case m:\n        m.baremetal = fake\n",
    "match [nki]:\n    case [m]:\n        m.baremetal = fake\n",
    "np.sctypeDict['float32'] = np.float16\n",
    "d = np.sctypeDict\nd['x'] = 1\n",
    "np.sctypeDict.update(float32=np.float16)\n",
    "from numpy import sctypeDict\nsctypeDict.clear()\n",
    "np.typecodes.pop('All')\n",
    "nl.tile_size.__init__(pmax=256)\n",
])
def test_patching_imported_modules(snippet):
    assert "monkey-patch" in error_rules(snippet)


def test_a_patch_inside_a_kernel_names_the_target():
    (v,) = errors("""
        def fused_conv2d_maxpool(X, W, bias, pool_size=1):
            np.allclose = lambda *a, **k: True
            return X
    """)
    assert (v.rule, v.line) == ("monkey-patch", FIRST + 2)
    assert "`np.allclose`" in v.message


@pytest.mark.parametrize("snippet", [
    "out[0:128, :] = tile\n",
    "acc += nisa.nc_matmul(a, b)\n",
    "gathered[:, j, :] = nisa.tensor_copy(block)\n",
    "np = None\n",
    "P = nl.tile_size.pmax\nblk = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.sbuf)\nblk[:, 0] = 1\n",
    "class Cfg:\n    pass\ncfg = Cfg()\ncfg.rows = nl.tile_size.pmax\n",
    "class Cache:\n    def __init__(self, p):\n        self._p = p\n        self._tiles = {}\nc = Cache(nl.tile_size.pmax)\n",
    "def kernel(x):\n    kernel.calls = getattr(kernel, 'calls', 0) + 1\n    return x\n",
    "ops = [nl.add, nl.maximum]\nops[0] = nl.multiply\n",
    "tiles = [nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]\ntiles[0][...] = 0\n",
    "def helper(dst, src):\n    dst[...] = src\nhelper(out[0], nl.load(x))\n",
    "def outer():\n    import math\n    def inner():\n        nonlocal math\n        math = None\n",
    "counter = 0\ndef f():\n    global counter, np\n    counter += 1\n",
    # a local that shares an imported name is the function's own
    "from neuronxcc.nki.typing import tensor\ndef k(x: tensor):\n    tensor = nl.ndarray((128, 4), dtype=nl.float32, "
    "buffer=nl.sbuf)\n    tensor[...] = 0\n    return tensor\n",
    "from neuronxcc.nki.language import psum\ndef k(x):\n    psum = []\n    psum.append(x)\n    return psum\n",
    "from os import path\ndef k(path):\n    return path.exists\n",
    "import time\nclass Timer:\n    pass\ndef k():\n    time = Timer()\n    time.start = 0\n",
])
def test_assignments_to_the_files_own_objects_are_fine(snippet):
    assert errors(snippet) == []


# ----------------------------------------------------------------------------- modules hidden in objects

@pytest.mark.parametrize("snippet", [
    "m = np.array([nki], dtype=object)[0]\n",
    "import functools\nm = functools.reduce(lambda a, b: b, [np, nki])\n",
    "class Holder:\n    def __init__(self, m):\n        self.m = m\nh = Holder(nki)\n",
    "class Holder:\n    mod = nki\n",
    "box = {}\nbox['m'] = nki\n",
    "box = []\nbox.append(nki)\n",
    "class Carrier(Exception):\n    pass\nerr = Carrier(nki)\n",
])
def test_modules_hidden_where_they_cannot_be_followed(snippet):
    assert "module-escape" in error_rules(snippet)


def test_reading_a_type_is_fine():
    assert errors("ok = type(x) == int or type(x) is type(y)\nprint(type(t), type(t).__name__, f'{type(t)}')\n"
                  "same = isinstance(a, type(b))\n") == []


def test_modules_passed_to_looking_only_builtins_are_fine():
    assert errors("print(nl)\nnames = dir(nisa)\nok = isinstance(x, np.ndarray) and hasattr(nl, 'ds')\n") == []


# ----------------------------------------------------------------------------- the __main__ block

MAIN_BLOCK = """
    def kernel(x):
        return x

    if __name__ == "__main__":
        import subprocess
        subprocess.run(["ls"])
        data = np.load("x.npy", allow_pickle=True)
        breakpoint()
"""


def test_errors_in_the_main_block_are_warnings():
    found = check(MAIN_BLOCK)
    assert found and all(v.severity == "warning" for v in found)
    assert {v.rule for v in found} >= {"import", "file-io", "forbidden-call"}
    assert all("grading never runs" in v.message for v in found)


def test_only_the_main_blocks_body_is_exempt():
    assert errors(MAIN_BLOCK.replace('"__main__"', '"kernel"'))
    assert errors(MAIN_BLOCK.replace("==", "!="))
    assert errors(MAIN_BLOCK + "    else:\n        import subprocess\n")
    assert [v for v in check(MAIN_BLOCK, "__main__.py") if v.severity == "error"]


DRIVER = """
    def main():
        import subprocess
        subprocess.run(["neuron-profile", "view"])
        check(np.load("expected.npy"))

    def check(expected):
        np.save("got.npy", expected)

    def unused_debug_helper(t):
        return eval("t")

    @nki.jit
    def fused_conv2d_maxpool(X, W, bias, pool_size=1):
        return X

    if __name__ == "__main__":
        main()
"""


def test_code_only_the_main_block_reaches_gives_warnings():
    found = precheck(HEADER + textwrap.dedent(DRIVER), "conv2d.py")
    assert {(v.line - FIRST, v.severity) for v in found} == {
        (2, "warning"), (3, "warning"), (4, "warning"), (7, "warning"),
        (10, "error")}                      # nothing calls unused_debug_helper: no reason to spare it


def test_a_function_that_only_calls_itself_is_not_spared():
    found = precheck(HEADER + "def loop(n):\n    open('x')\n    return loop(n - 1)\n", "conv2d.py")
    assert [(v.rule, v.severity) for v in found] == [("forbidden-call", "error")]


@pytest.mark.parametrize("change", [
    lambda src: src.replace("@nki.jit\n    def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n        return X",
                            "@nki.jit\n    def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n        return check(X)"),
    lambda src: src.replace("        main()", "        main()\n        unused_debug_helper(1)").replace(
        "def unused_debug_helper(t):", "@functools.cache\n    def unused_debug_helper(t):"),
    lambda src: src.replace("def main():", "def fused_conv2d_maxpool():").replace("main()", "fused_conv2d_maxpool()"),
    lambda src: src.replace("def check(expected):", "def check(expected=np.load('x.npy')):"),
])
def test_code_the_grader_can_reach_stays_an_error(change):
    found = precheck(HEADER + "import functools\n" + textwrap.dedent(change(DRIVER)), "conv2d.py")
    assert [v for v in found if v.severity == "error"]


def test_entry_points_given_by_the_caller():
    found = precheck(HEADER + textwrap.dedent(DRIVER), "conv2d.py", entry_points=["main"])
    assert {v.line - FIRST for v in found if v.severity == "error"} == {2, 3, 4, 7, 10}


# ----------------------------------------------------------------------------- compute rules

TRANSPOSE_REF = (ROOT / "reference_kernels" / "transpose.py").read_text()


def kernel(body: str, helpers: str = "") -> str:
    return HEADER + textwrap.dedent(helpers) + "\n@nki.jit\ndef matrix_transpose(a_tensor):\n" + \
        textwrap.indent(textwrap.dedent(body), "    ")


COPY_TILE = """\
out = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
t = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.sbuf)
nisa.dma_copy(dst=t, src=a_tensor[0:128, 0:128])
"""


def test_reference_transpose_uses_only_nc_transpose():
    assert compute_violations(TRANSPOSE_REF, "matrix_transpose", {"nc_transpose"}) == []


def test_calibration_transpose_uses_only_nc_transpose():
    source = (ROOT / "reference_kernels" / "calibration.py").read_text()
    assert compute_violations(source, "transpose_per_tile", {"nc_transpose"}) == []


def test_starter_transpose_has_nothing_to_flag():
    source = (ROOT / "student_template" / "kernels.py").read_text()
    assert compute_violations(source, "matrix_transpose", {"nc_transpose"}) == []


@pytest.mark.parametrize("call,shown", [
    ("nl.transpose(t)", "nl.transpose"),
    ("nisa.dma_transpose(t)", "nisa.dma_transpose"),
    ("nisa.nc_matmul(t, t)", "nisa.nc_matmul"),
    ("nl.matmul(t, t, transpose_x=True)", "nl.matmul"),
    ("nisa.tensor_tensor(t, t, op=nl.add)", "nisa.tensor_tensor"),
    ("nki.language.transpose(t)", "nl.transpose"),
    ("nki.isa.dma_transpose(t)", "nisa.dma_transpose"),
    ("nl.add(t, t)", "nl.add"),
    ("nisa.activation(op=nl.exp, data=t)", "nisa.activation"),
])
def test_other_compute_instructions_are_violations(call, shown):
    source = kernel(COPY_TILE + f"r = {call}\nnisa.dma_copy(dst=out, src=r)\nreturn out\n")
    found = compute_violations(source, "matrix_transpose", {"nc_transpose"})
    assert len(found) == 1, found
    v = found[0]
    assert v.rule == "compute-instruction" and v.line == 11 and v.severity == "error"
    assert f"matrix_transpose calls {shown}" in v.message and "only nc_transpose may compute" in v.message


def test_nc_transpose_and_data_movement_are_allowed():
    source = kernel(COPY_TILE + textwrap.dedent("""\
        p = nisa.nc_transpose(t)
        s = nisa.tensor_copy(p)
        z = nl.zeros_like(s)
        c = nl.copy(s)
        nisa.memset(z, value=0.0)
        for i in nl.affine_range(1):
            for j in nl.sequential_range(nl.tile_size.pmax // 128):
                nl.store(out, value=nl.load(a_tensor))
        nisa.dma_copy(dst=out, src=c, engine=nisa.dma_engine)
        return out
    """))
    assert compute_violations(source, "matrix_transpose", {"nc_transpose"}) == []


def test_aliases_from_the_files_own_imports():
    source = textwrap.dedent("""\
        from neuronxcc import nki
        import neuronxcc.nki.language as lang
        from neuronxcc.nki.isa import dma_transpose as dt, nc_transpose

        @nki.jit
        def matrix_transpose(a_tensor):
            x = lang.transpose(a_tensor)
            y = dt(a_tensor)
            z = nc_transpose(a_tensor)
            return z
    """)
    found = compute_violations(source, "matrix_transpose", {"nc_transpose"})
    assert [(v.line, v.rule) for v in found] == [(7, "compute-instruction"), (8, "compute-instruction")]
    assert "nl.transpose (as `lang.transpose`)" in found[0].message
    assert "nisa.dma_transpose (as `dt`)" in found[1].message


def test_module_level_helpers_are_followed():
    source = kernel("return _flip(a_tensor)\n", helpers="""
        def _flip(x):
            return _really_flip(x)

        def _really_flip(x):
            return nl.transpose(x)

        def unrelated(x):
            return nisa.nc_matmul(x, x)
    """)
    found = compute_violations(source, "matrix_transpose", {"nc_transpose"})
    assert len(found) == 1
    assert found[0].message.startswith("helper _really_flip (used by matrix_transpose) calls nl.transpose")


def test_instruction_hidden_behind_a_local_alias():
    source = kernel("f = nisa.dma_transpose\nreturn f(a_tensor)\n")
    found = compute_violations(source, "matrix_transpose", {"nc_transpose"})
    assert {v.line for v in found} == {8, 9}
    assert "refers to nisa.dma_transpose" in found[0].message
    assert "calls nisa.dma_transpose (as `f`)" in found[1].message


def test_instruction_passed_as_a_value():
    source = kernel("return apply(nl.transpose, a_tensor)\n")
    assert [v.rule for v in compute_violations(source, "matrix_transpose", {"nc_transpose"})] == \
        ["compute-instruction"]


def test_other_functions_in_the_file_are_not_checked():
    source = (ROOT / "student_template" / "kernels.py").read_text()
    assert compute_violations(source, "vector_add_stream", {"nc_transpose"}) != []
    assert compute_violations(source, "vector_add_stream", {"tensor_tensor"}) == []


def test_qualified_allowed_names():
    source = kernel("return nl.transpose(nisa.nc_transpose(a_tensor))\n")
    found = compute_violations(source, "matrix_transpose", {"nisa.nc_transpose"})
    assert len(found) == 1 and "nl.transpose" in found[0].message
    assert compute_violations(source, "matrix_transpose", {"nisa.nc_transpose", "nl.transpose"}) == []


def test_missing_function_gives_no_compute_violations():
    assert compute_violations(HEADER, "matrix_transpose", {"nc_transpose"}) == []


def test_compute_violations_on_unparsable_source():
    assert [v.rule for v in compute_violations("def f(:\n", "matrix_transpose", set())] == ["syntax"]

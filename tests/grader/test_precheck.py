"""Static precheck of kernel source: every rule with a violating and an allowed snippet, the
reference kernels and the starter files pass, and the part-1 compute rule for the transpose."""
import textwrap
from pathlib import Path

import pytest

from grader.precheck import Violation, compute_violations, precheck

ROOT = Path(__file__).resolve().parents[2]
KERNEL_FILES = sorted((ROOT / "reference_kernels").glob("*.py")) + sorted((ROOT / "student_template").glob("*.py"))

HEADER = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
"""


def check(snippet: str) -> list[Violation]:
    return precheck(HEADER + textwrap.dedent(snippet), "conv2d.py")


def rules(snippet: str) -> list[str]:
    return [v.rule for v in check(snippet)]


def only(snippet: str) -> Violation:
    found = check(snippet)
    assert len(found) == 1, found
    return found[0]


# ----------------------------------------------------------------------------- the known-good files

@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_kernels_and_starter_files_pass(path):
    assert precheck(path.read_text(), path.name) == []


def test_violation_is_a_frozen_dataclass():
    v = Violation(3, "import", "`import os` is not allowed.")
    assert (v.line, v.rule, v.message) == (3, "import", "`import os` is not allowed.")
    with pytest.raises(AttributeError):
        v.line = 4


def test_unparsable_source_is_a_violation_not_an_exception():
    found = precheck("def f(:\n", "conv2d.py")
    assert [v.rule for v in found] == ["syntax"] and found[0].line == 1
    assert "conv2d.py does not parse" in found[0].message


def test_results_are_sorted_by_line():
    found = check("""
        import os
        x = eval("1")
        import sys
    """)
    assert [v.line for v in found] == sorted(v.line for v in found)
    assert [v.rule for v in found] == ["import", "forbidden-call", "import"]


# ----------------------------------------------------------------------------- imports

@pytest.mark.parametrize("line", [
    "import numpy",
    "import numpy as np",
    "import math",
    "from math import ceil, prod",
    "import neuronxcc.nki as nki",
    "import neuronxcc.nki",
    "import neuronxcc.nki.language as nl",
    "import neuronxcc.nki.isa as nisa",
    "import neuronxcc.nki.typing as nt",
    "from neuronxcc import nki",
    "from neuronxcc.nki import baremetal, benchmark",
    "from neuronxcc.nki.isa import nc_transpose",
    "from numpy import float32, testing",
    "from __future__ import annotations",
])
def test_allowed_imports(line):
    assert precheck(line + "\n", "k.py") == []


@pytest.mark.parametrize("line,shown", [
    ("import os", "import os"),
    ("import subprocess as sp", "import subprocess"),
    ("import numpy as np, sys", "import sys"),
    ("from os import path", "from os import path"),
    ("import importlib", "import importlib"),
    ("import neuronxcc", "import neuronxcc"),
    ("from neuronxcc import starfish", "from neuronxcc import starfish"),
    ("import mathx", "import mathx"),
    ("import numpyx", "import numpyx"),
    ("import builtins", "import builtins"),
    ("import ctypes", "import ctypes"),
])
def test_forbidden_imports(line, shown):
    found = precheck(line + "\n", "k.py")
    assert [v.rule for v in found] == ["import"]
    assert found[0].message.startswith(f"`{shown}` is not allowed")
    assert "numpy, math and neuronxcc.nki" in found[0].message


def test_import_inside_a_function_is_checked_too():
    v = only("""
        def kernel(x):
            import os
            return x
    """)
    assert (v.rule, v.line) == ("import", 7)


@pytest.mark.parametrize("line", ["from . import helpers", "from .helpers import tile"])
def test_relative_import(line):
    assert [v.rule for v in precheck(line + "\n", "k.py")] == ["import"]


@pytest.mark.parametrize("line", ["from numpy import *", "from neuronxcc.nki.language import *"])
def test_star_import(line):
    found = precheck(line + "\n", "k.py")
    assert [v.rule for v in found] == ["import"] and "star import" in found[0].message


@pytest.mark.parametrize("line", ["import numpy.ctypeslib", "from numpy import ctypeslib", "import numpy.f2py"])
def test_numpy_native_code_submodules(line):
    assert [v.rule for v in precheck(line + "\n", "k.py")] == ["import"]


def test_numpy_native_code_submodule_by_attribute():
    assert rules("p = np.ctypeslib.as_ctypes(x)\n") == ["import"]


# ----------------------------------------------------------------------------- file access

@pytest.mark.parametrize("snippet", [
    "ref = np.load('/grader/ref.npy')\n",
    "np.save('out.npy', x)\n",
    "np.savez_compressed('out.npz', a=x)\n",
    "m = np.memmap('f', dtype=np.float32)\n",
    "x = np.fromfile('f')\n",
    "alias = np\nalias.load('f')\n",
    "import numpy.lib.format as fmt\n",
    "from numpy import load\n",
    "arr.tofile('out.bin')\n",
])
def test_numpy_file_io(snippet):
    assert "file-io" in rules(snippet)


@pytest.mark.parametrize("snippet", [
    "x = np.zeros((4, 4), dtype=np.float32)\n",
    "ok = np.allclose(a, b)\n",
    "n = np.dtype(t.dtype).itemsize\n",
    "nl.load(src)\n",                           # NKI's load is data movement, not file access
])
def test_numpy_compute_is_fine(snippet):
    assert check(snippet) == []


# ----------------------------------------------------------------------------- forbidden builtins

@pytest.mark.parametrize("name", ["open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars",
                                  "getattr", "setattr", "delattr", "breakpoint", "input"])
def test_forbidden_builtin_calls(name):
    v = only(f"r = {name}('x')\n")
    assert v.rule == "forbidden-call" and v.line == 5
    assert v.message.startswith(f"call to {name}() is not allowed")


def test_forbidden_builtin_calls_inside_kernels():
    found = check("""
        def kernel(x):
            f = open("/tmp/score.txt", "w")
            g = getattr(np, "allclose")
            return x
    """)
    assert [v.rule for v in found] == ["forbidden-call", "forbidden-call"]


def test_forbidden_builtin_aliased_without_calling():
    v = only("g = getattr\n")
    assert v.rule == "forbidden-call" and "reference to the built-in getattr" in v.message


def test_names_that_shadow_builtins_are_not_the_builtins():
    assert check("""
        def kernel(input, vars=None):
            return input[0]
    """) == []


def test_methods_with_builtin_names_are_fine():
    assert check("y = x.compile\nz = re_pattern.input\n") == []


# ----------------------------------------------------------------------------- dunders

@pytest.mark.parametrize("snippet,what", [
    ("c = x.__class__\n", "__class__"),
    ("g = f.__globals__\n", "__globals__"),
    ("b = ().__class__.__bases__[0].__subclasses__()\n", "__subclasses__"),
    ("d = nl.__dict__\n", "__dict__"),
    ("b = __builtins__\n", "__builtins__"),
    ("s = __spec__\n", "__spec__"),
    ("from numpy import __config__\n", "__config__"),
])
def test_dunder_use(snippet, what):
    found = check(snippet)
    assert found and {v.rule for v in found} == {"dunder"}
    assert any(what in v.message for v in found)


def test_main_guard_is_allowed():
    assert check("""
        if __name__ == "__main__":
            print("run the kernel")
        if "__main__" != __name__:
            pass
    """) == []


def test_other_uses_of_dunder_name_are_not():
    assert rules("print(__name__)\n") == ["dunder"]


def test_dunder_import_call_is_reported_once():
    v = only("m = __import__('os')\n")
    assert v.rule == "forbidden-call"


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
    "from numpy import testing\ntesting.assert_allclose = f\n",
    "from neuronxcc.nki import baremetal\nbaremetal.cache = {}\n",
    "import neuronxcc.nki\nneuronxcc.nki.benchmark = f\n",
    "n = np\nn.allclose = f\n",
    "t = nl.tile_size\nt.pmax = 256\n",
    "np.core.numeric.__dict__['allclose'] = f\n",
])
def test_assignments_to_imported_modules(snippet):
    assert "monkey-patch" in rules(snippet)


def test_monkey_patch_inside_a_kernel_names_the_target():
    v = only("""
        def fused_conv2d_maxpool(X, W, bias, pool_size=1):
            np.allclose = lambda *a, **k: True
            return X
    """)
    assert (v.rule, v.line) == ("monkey-patch", 7)
    assert "`np.allclose`" in v.message


@pytest.mark.parametrize("snippet", [
    "out[0:128, :] = tile\n",
    "acc += nisa.nc_matmul(a, b)\n",
    "gathered[:, j, :] = nisa.tensor_copy(block)\n",
    "np = None\n",                                # rebinding a name in this file only
    "P = nl.tile_size.pmax\nblk = nl.ndarray((P, 4), dtype=nl.float32, buffer=nl.sbuf)\nblk[:, 0] = 1\n",
    "class Cfg:\n    pass\ncfg = Cfg()\ncfg.rows = 4\n",
])
def test_assignments_to_own_objects_are_fine(snippet):
    assert check(snippet) == []


# ----------------------------------------------------------------------------- global / nonlocal

@pytest.mark.parametrize("snippet", [
    "def f():\n    global np\n    np = None\n",
    "def f():\n    global nisa, counter\n",
    "def outer():\n    import math\n    def inner():\n        nonlocal math\n        math = None\n",
])
def test_global_and_nonlocal_of_imported_names(snippet):
    assert "global-import" in rules(snippet)


def test_global_of_own_names_is_fine():
    assert check("counter = 0\ndef f():\n    global counter\n    counter += 1\n") == []


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
    assert v.rule == "compute-instruction" and v.line == 11
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

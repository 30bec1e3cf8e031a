"""The precheck under each NKI dialect. A spec names its dialect (grader/spec.py); the precheck
accepts that dialect's modules as it always accepted neuronxcc.nki, and a file in the other one
(or importing both) gets ONE clear error: the assignment's dialect, the file's, and the first
migration rule the file breaks. Attacks first: a file in the wrong dialect must not reach a
grade, however it imports the other package, and NKI 0.6's package must not open the
simulator's internals."""
import textwrap
from pathlib import Path

import pytest

import grader
from grader.precheck import compute_violations, precheck
from grader.precheck.migration import DST_FIRST, RESULT_RETURNED
from nkisim.dialects import CURRENT, LEGACY
from nkisim.nki06.names import LANGUAGE_REMOVED, NKI_REMOVED

ROOT = Path(__file__).resolve().parents[2]
NKI06_FILES = sorted((ROOT / "reference_kernels" / "nki06").glob("*.py")) + \
    sorted((ROOT / "student_template" / "nki06").glob("*.py"))
LEGACY_KERNELS = [ROOT / "reference_kernels" / name for name in ("conv2d_optimized.py", "conv2d_relaxed.py",
                                                                  "transpose.py", "vector_add.py")] + \
    [ROOT / "student_template" / name for name in ("conv2d.py", "kernels.py")]

CURRENT_HEADER = "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"
LEGACY_HEADER = ("import numpy as np\nimport neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n"
                 "import neuronxcc.nki.isa as nisa\n")
FIRST = 5                          # the line of a body's first line after either header

# A small valid NKI 0.6 part-1 kernel: destination-first calls, shared_hbm output
TRANSPOSE_06 = CURRENT_HEADER + textwrap.dedent("""\
    @nki.jit
    def matrix_transpose(a_tensor):
        M, N = a_tensor.shape
        out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(M // 128):
            for j in nl.affine_range(N // 128):
                tile = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=tile, src=a_tensor[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128])
                flipped = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.psum)
                nisa.nc_transpose(dst=flipped, data=tile)
                back = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=back, src=flipped)
                nisa.dma_copy(dst=out[j * 128:(j + 1) * 128, i * 128:(i + 1) * 128], src=back)
        return out
    """)
# The same kernel in the legacy dialect
TRANSPOSE_LEGACY = LEGACY_HEADER + textwrap.dedent("""\
    @nki.jit
    def matrix_transpose(a_tensor):
        M, N = a_tensor.shape
        out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.hbm)
        for i in nl.affine_range(M // 128):
            for j in nl.affine_range(N // 128):
                tile = nl.load(a_tensor[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128])
                flipped = nisa.nc_transpose(tile)
                nl.store(out[j * 128:(j + 1) * 128, i * 128:(i + 1) * 128], value=nisa.tensor_copy(flipped))
        return out
    """)


def findings(source: str, dialect: str, entry_points=("matrix_transpose",)):
    return precheck(source, "kernels.py", entry_points=entry_points, dialect=dialect)


def the_one_error(source: str, dialect: str):
    """The file's findings are exactly one error, of the dialect rule: returned."""
    found = findings(source, dialect)
    assert [(v.rule, v.severity) for v in found] == [("dialect", "error")], found
    return found[0]


# ----------------------------------------------------------------------------- accepted

def test_a_small_nki06_kernel_passes_under_the_nki06_spec():
    assert findings(TRANSPOSE_06, CURRENT.name) == []


def test_the_legacy_kernel_still_passes_under_a_legacy_spec():
    assert findings(TRANSPOSE_LEGACY, LEGACY.name) == []


def test_the_nki06_specs_static_check_uses_its_dialect():
    spec = grader.load_spec("asst4-trainium2-nki06")
    sub = grader.submission_from_bytes("kernels.py", TRANSPOSE_06.encode(), spec)
    assert grader.static_findings(sub, spec) == []
    legacy = grader.submission_from_bytes("kernels.py", TRANSPOSE_LEGACY.encode(), spec)
    assert [f["rule"] for f in grader.static_findings(legacy, spec)] == ["dialect"]
    # and the legacy spec the other way round
    spec = grader.load_spec("asst4-trainium2")
    sub = grader.submission_from_bytes("kernels.py", TRANSPOSE_06.encode(), spec)
    assert [(f["rule"], f["severity"]) for f in grader.static_findings(sub, spec)] == [("dialect", "error")]


def test_our_nki06_kernels_and_starter_files_exist():
    names = {p.relative_to(ROOT).as_posix() for p in NKI06_FILES}
    assert {"reference_kernels/nki06/conv2d_optimized.py", "reference_kernels/nki06/transpose.py",
            "student_template/nki06/conv2d.py", "student_template/nki06/kernels.py"} <= names


@pytest.mark.parametrize("path", NKI06_FILES, ids=lambda p: f"{p.parent.parent.name}/nki06/{p.name}")
def test_our_nki06_kernels_and_starter_files_have_nothing_at_all(path):
    assert precheck(path.read_text(), path.name, dialect=CURRENT.name) == []


def test_the_nki06_reference_transpose_uses_only_nc_transpose():
    source = (ROOT / "reference_kernels" / "nki06" / "transpose.py").read_text()
    assert compute_violations(source, "matrix_transpose", {"nc_transpose"}) == []


# ----------------------------------------------------------------------------- one clear error

def test_a_legacy_file_under_the_nki06_spec_gets_one_error_naming_both_dialects_and_the_rule():
    error = the_one_error(TRANSPOSE_LEGACY, CURRENT.name)
    assert error.line == 2                                     # the first legacy import
    assert error.message.startswith("this assignment is written in NKI 0.6 (nki) on Neuron SDK 2.32 "
                                    "(import nki); this file imports neuronxcc.nki, the legacy dialect: "
                                    "legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron SDK 2.26.")
    assert "Migrate it: import nki, nki.language as nl and nki.isa as nisa instead" in error.message
    # nl.load is still NKI 0.6 (a convenience wrapper); the first call whose result is used is
    # nisa.nc_transpose's, at the body's 8th line
    assert error.message.endswith(f"; line {FIRST + 7} breaks the first rule: {DST_FIRST}.")
    assert "nisa.nc_matmul(dst=psum, stationary=a, moving=b)" in DST_FIRST


@pytest.mark.parametrize("path", LEGACY_KERNELS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_legacy_kernel_of_ours_is_one_error_under_the_nki06_spec(path):
    found = precheck(path.read_text(), path.name, dialect=CURRENT.name)
    assert [(v.rule, v.severity) for v in found] == [("dialect", "error")]
    assert "this file imports neuronxcc.nki, the legacy dialect" in found[0].message


@pytest.mark.parametrize("path", [p for p in NKI06_FILES if p.name != "__init__.py"],
                         ids=lambda p: f"{p.parent.parent.name}/nki06/{p.name}")
def test_every_nki06_kernel_of_ours_is_one_error_under_a_legacy_spec(path):
    found = precheck(path.read_text(), path.name, dialect=LEGACY.name)
    assert [(v.rule, v.severity) for v in found] == [("dialect", "error")]
    assert "this file imports nki, the current dialect" in found[0].message


def test_an_nki06_file_under_a_legacy_spec_gets_one_error_with_the_legacy_rule():
    error = the_one_error(TRANSPOSE_06, LEGACY.name)
    assert error.line == 2
    assert error.message.startswith("this assignment is written in legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron "
                                    "SDK 2.26 (import neuronxcc.nki); this file imports nki, the current dialect: "
                                    "NKI 0.6 (nki) on Neuron SDK 2.32, which Neuron SDK 2.26 does not have.")
    assert ("Migrate it: import neuronxcc.nki as nki, neuronxcc.nki.language as nl and neuronxcc.nki.isa as nisa "
            "instead") in error.message
    # dma_copy takes dst in both dialects; nc_transpose(dst=...) is the first call legacy NKI lacks
    assert error.message.endswith(f"; line {FIRST + 9} breaks the first rule: {RESULT_RETURNED}.")


def test_the_default_dialect_is_the_legacy_one():
    """A caller that names no dialect (every spec before the key) gets the legacy rules."""
    assert precheck(TRANSPOSE_LEGACY, "kernels.py", entry_points=("matrix_transpose",)) == []
    found = precheck(TRANSPOSE_06, "kernels.py", entry_points=("matrix_transpose",))
    assert [v.rule for v in found] == ["dialect"]


def test_a_file_mixing_both_dialects_gets_the_04_compilers_error():
    mixed = TRANSPOSE_06.replace("import nki.isa as nisa\n", "import nki.isa as nisa\nimport neuronxcc.nki as old\n")
    mixed = mixed.replace("    return out\n", "    old.language.device_print('x', out)\n    return out\n")
    assert "old.language" in mixed
    error = the_one_error(mixed, CURRENT.name)
    assert error.line == 5
    assert error.message.startswith("this file imports both nki and neuronxcc.nki: since NKI 0.4 (Neuron SDK 2.30) "
                                    "using neuronxcc.nki inside an NKI kernel is a compilation error, and this "
                                    "assignment is written in NKI 0.6 (nki) on Neuron SDK 2.32 (import nki).")
    assert "Delete the neuronxcc.nki imports and write what used them in NKI 0.6 (nki)" in error.message


def test_a_file_mixing_both_dialects_under_a_legacy_spec():
    mixed = TRANSPOSE_LEGACY.replace("import neuronxcc.nki.isa as nisa\n",
                                     "import neuronxcc.nki.isa as nisa\nimport nki.isa as new\n")
    mixed = mixed.replace("    return out\n", "    new.memset(dst=out, value=0.0)\n    return out\n")
    error = the_one_error(mixed, LEGACY.name)
    assert error.line == 5
    assert error.message.startswith("this assignment is written in legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron "
                                    "SDK 2.26 (import neuronxcc.nki); this file also imports nki, the current dialect")
    assert "Delete the nki imports and write what used them in the legacy dialect" in error.message
    assert error.message.endswith(f"; line {FIRST + 10} breaks the first rule: {RESULT_RETURNED}.")


@pytest.mark.parametrize("body, line, rule", [
    ("t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)\n"
     "nisa.dma_copy(dst=t, src=x, mask=None)\n", 2, "NKI 0.6 removed mask="),
    ("i = nl.arange(128)[:, None]\n", 1, LANGUAGE_REMOVED["arange"]),
    ("s = nki.benchmark\n", 1, NKI_REMOVED["benchmark"]),
    ("t = nisa.tensor_copy(x, dtype=nl.float16)\n", 1, "NKI 0.6 removed dtype="),
    ("nisa.tensor_copy(x)\ni = nl.arange(128)\n", 2, LANGUAGE_REMOVED["arange"]),
    ("acc = nisa.nc_matmul(x, x)\ni = nl.arange(128)\n", 1, DST_FIRST),
    ("acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)\nacc += nisa.nc_matmul(x, x)\n", 2, DST_FIRST),
])
def test_the_first_migration_rule_the_file_breaks(body, line, rule):
    """The earliest construct NKI 0.6 does not have, by line, names the rule to fix first.
    (A legacy call whose result is dropped, `nisa.tensor_copy(x)` alone, breaks nothing yet.)"""
    source = LEGACY_HEADER + "\n@nki.jit\ndef matrix_transpose(x):\n" + textwrap.indent(body, "    ") + \
        "    return x\n"
    error = the_one_error(source, CURRENT.name)
    assert f"line {FIRST + 2 + line} breaks the first rule: {rule}" in error.message, error.message


def test_a_file_breaking_no_rule_is_told_to_change_its_imports():
    source = LEGACY_HEADER + "\n@nki.jit\ndef matrix_transpose(x):\n    return x\n"
    error = the_one_error(source, CURRENT.name)
    assert error.message.endswith("Migrate it: import nki, nki.language as nl and nki.isa as nisa instead.")


# ----------------------------------------------------------------------------- attacks

@pytest.mark.parametrize("imports", [
    "import neuronxcc\nx = neuronxcc.nki.isa.nc_transpose\n",
    "from neuronxcc import nki as legacy\n",
    "from neuronxcc.nki.isa import nc_transpose\n",
    "from neuronxcc.nki.language import *\n",
    "def helper():\n    import neuronxcc.nki.isa as hidden\n    return hidden\n",
    "try:\n    import neuronxcc.nki.isa as maybe\nexcept ImportError:\n    maybe = None\n",
])
def test_the_legacy_package_imported_any_way_is_the_one_error(imports):
    """However the file reaches neuronxcc.nki (its parent, a from-import, a star, inside a
    function, behind try), it is the mixed-file error, once."""
    error = the_one_error(TRANSPOSE_06 + imports, CURRENT.name)
    assert error.message.startswith("this file imports both nki and neuronxcc.nki")


@pytest.mark.parametrize("imports", [
    "import nki\n", "from nki import isa\n", "import nki.language as nl2\n", "from nki.isa import *\n",
])
def test_the_nki06_package_imported_any_way_is_the_one_error_under_a_legacy_spec(imports):
    error = the_one_error(TRANSPOSE_LEGACY + imports, LEGACY.name)
    assert "this file also imports nki, the current dialect" in error.message


def test_the_other_dialect_only_in_the_main_block_is_a_warning():
    """The main block never runs in grading: importing the other dialect there only warns."""
    source = TRANSPOSE_06 + "\nif __name__ == \"__main__\":\n    import neuronxcc.nki as old\n"
    found = findings(source, CURRENT.name)
    assert [(v.rule, v.severity) for v in found] == [("dialect", "warning")]
    assert "grading never runs it" in found[0].message


@pytest.mark.parametrize("snippet", [
    "import nki.bind\n", "from nki import kernel\n", "from nki import rules as r\n", "x = nki.names\n",
    "import nki.compiler\n", "import nki.collectives\n", "x = nki.kernel.CurrentKernel\n",
])
def test_nki06s_package_opens_only_its_api(snippet):
    """nki (nkisim.nki06 here) is a package whose other modules are the simulator's internals (on
    hardware, the compiler's): only nki.jit, nki.simulate, nki.language, nki.isa, nki.typing."""
    found = [v for v in findings(TRANSPOSE_06 + snippet, CURRENT.name) if v.severity == "error"]
    assert found and {v.rule for v in found} <= {"import", "module-use"}
    assert all("of nki a kernel may use nki.jit, nki.simulate and the modules nki.language, nki.isa and "
               "nki.typing" in v.message for v in found)


@pytest.mark.parametrize("snippet, rule", [
    ("nisa.nc_matmul = None\n", "monkey-patch"),
    ("x = nisa._bind\n", "private"),
    ("x = nl._np.load\n", "private"),
    ("x = nisa.__dict__\n", "dunder"),
    ("nisa.engine.vector = 3\n", "monkey-patch"),
])
def test_nki06s_modules_are_guarded_as_the_legacy_ones(snippet, rule):
    assert rule in {v.rule for v in findings(TRANSPOSE_06 + snippet, CURRENT.name) if v.severity == "error"}


@pytest.mark.parametrize("call, shown", [
    ("nisa.tensor_tensor(dst=flipped, data1=tile, data2=tile, op=nl.add)", "nisa.tensor_tensor"),
    ("nisa.dma_transpose(dst=flipped, src=tile)", "nisa.dma_transpose"),
    ("nisa.nc_matmul(dst=flipped, stationary=tile, moving=tile)", "nisa.nc_matmul"),
    ("nisa.activation(dst=flipped, op=nl.copy, data=tile)", "nisa.activation"),
])
def test_nki06s_compute_instructions_break_the_transpose_rule(call, shown):
    """Part 1 computes only with nc_transpose, by instruction name, in either dialect."""
    source = TRANSPOSE_06.replace("nisa.nc_transpose(dst=flipped, data=tile)", call)
    found = compute_violations(source, "matrix_transpose", {"nc_transpose"})
    assert len(found) == 1 and found[0].message.startswith(f"matrix_transpose calls {shown}, a compute instruction")
    assert compute_violations(TRANSPOSE_06, "matrix_transpose", {"nc_transpose"}) == []
    assert compute_violations(TRANSPOSE_06, "matrix_transpose", {"nki.isa.nc_transpose"}) == []

"""Grading under each NKI dialect, end to end on the simulator. The spec's dialect travels with
every configuration's job, and the sandboxed child refuses a kernel nkisim would trace in the
other dialect (behind the precheck, which a spec or a caller may turn off); the report says which
dialect and SDK its kernels were checked against; the references of a spec's dialect stand for
its tiers. Attacks first: with the precheck off, a kernel in the wrong dialect (or one that says
it is in the right one) must still score nothing."""
import dataclasses
import io
import os
import tarfile

import pytest

import grader
from grader.grade import GradeOptions, grade
from grader.references import FILES, archive, reference_dir
from grader.sandbox import Limits
from grader.submission import submission_from_bytes
from grader.vocabulary import TestStatus
from nkisim.dialects import CURRENT, LEGACY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
NKI06 = grader.load_spec("asst4-trainium2-nki06")
LEGACY_SPEC = grader.load_spec("asst4-trainium2")
ROOMY = dict(time_budget_s=3600, config_timeout_s=1800, limits=Limits(wall_seconds=1800))
SMALL = {"m": 256, "n": 256, "dtype": "float32"}


def part1(spec):
    """The spec with part 1's transpose test alone, on one small matrix: seconds to grade."""
    test = dataclasses.replace(spec.test("transpose"), configs=(SMALL,))
    return dataclasses.replace(spec, tests=(test,))


def read(path: str) -> bytes:
    with open(os.path.join(ROOT, path), "rb") as fh:
        return fh.read()


def graded_part1(source: bytes, spec, precheck: bool = True):
    spec = part1(spec)
    sub = submission_from_bytes("kernels.py", source, spec)
    report = grade(sub, spec, GradeOptions(backend="sim", seed=3, run_precheck=precheck))
    return report, report.tests[0]


LEGACY_TRANSPOSE = read("reference_kernels/transpose.py")
LEGACY_DECORATORS = b"@nki.compiler.skip_middle_end_transformations\n@nki.jit\ndef matrix_transpose"
NKI06_TRANSPOSE = read("reference_kernels/nki06/transpose.py")


# ----------------------------------------------------------------------------- attacks: precheck off

def test_with_the_precheck_off_a_legacy_kernel_still_scores_nothing_under_the_nki06_spec():
    report, test = graded_part1(LEGACY_TRANSPOSE, NKI06, precheck=False)
    assert report.rejections == [] and test.status == TestStatus.ERROR and test.points == 0
    assert "DialectError: this assignment is written in NKI 0.6 (nki) on Neuron SDK 2.32 (import nki); " \
           "matrix_transpose is a kernel of the legacy dialect" in test.message
    assert "Migrate it: import nki, nki.language as nl and nki.isa as nisa instead." in test.message


def test_with_the_precheck_off_an_nki06_kernel_still_scores_nothing_under_a_legacy_spec():
    report, test = graded_part1(NKI06_TRANSPOSE, LEGACY_SPEC, precheck=False)
    assert test.status == TestStatus.ERROR and test.points == 0
    assert "DialectError: this assignment is written in legacy NKI (neuronxcc.nki, NKI 0.1) on Neuron SDK 2.26 " \
           "(import neuronxcc.nki); matrix_transpose is a kernel of the current dialect" in test.message


def test_a_kernel_saying_it_is_in_the_assignments_dialect_is_judged_by_what_nkisim_traces():
    """A legacy @nki.jit kernel given a `dialect` attribute of NKI 0.6 is still traced as a
    legacy kernel (none of NKI 0.6's kernel rules), so it is refused as one."""
    says = b'def _says_nki06(kernel):\n    kernel.dialect = "nki-0.6"\n    return kernel\n\n\n'
    forged = LEGACY_TRANSPOSE.replace(LEGACY_DECORATORS, says + b"@_says_nki06\n" + LEGACY_DECORATORS)
    assert forged != LEGACY_TRANSPOSE
    _, test = graded_part1(forged, NKI06, precheck=False)
    assert test.status == TestStatus.ERROR and "matrix_transpose is a kernel of the legacy dialect" in test.message


def test_an_undecorated_kernel_is_refused_under_the_nki06_spec():
    """NKI 0.6 compiles @nki.jit kernels only; nkisim would trace a bare function with none of
    NKI 0.6's kernel rules."""
    bare = NKI06_TRANSPOSE.replace(b"@nki.jit\ndef matrix_transpose", b"def matrix_transpose")
    assert bare != NKI06_TRANSPOSE
    _, test = graded_part1(bare, NKI06, precheck=False)
    assert test.status == TestStatus.ERROR and test.points == 0
    assert "matrix_transpose is not an @nki.jit kernel, and NKI 0.6 (nki) compiles only those" in test.message
    bare = LEGACY_TRANSPOSE.replace(LEGACY_DECORATORS, b"def matrix_transpose")
    assert bare != LEGACY_TRANSPOSE
    _, plain = graded_part1(bare, LEGACY_SPEC, precheck=False)
    assert plain.status == TestStatus.PASSED               # the legacy dialect always took bare functions


def test_a_legacy_kernel_whose_file_uses_nki06_is_refused():
    """A legacy kernel whose file also imports nki could trace NKI 0.6's instructions as legacy ones."""
    mixed = b"import nki.isa as nisa06\n" + LEGACY_TRANSPOSE
    _, test = graded_part1(mixed, LEGACY_SPEC, precheck=False)
    assert test.status == TestStatus.ERROR
    assert "matrix_transpose's file also uses nki, the current dialect" in test.message


def test_an_nki06_kernel_whose_file_uses_the_legacy_package_gets_the_04_compilers_error():
    mixed = b"from neuronxcc.nki import language as old_nl\n" + NKI06_TRANSPOSE
    _, test = graded_part1(mixed, NKI06, precheck=False)
    assert test.status == TestStatus.ERROR
    assert "matrix_transpose's file uses neuronxcc.nki: since NKI 0.4 (Neuron SDK 2.30) using neuronxcc.nki " \
           "inside an NKI kernel is a compilation error" in test.message


def test_with_the_precheck_on_a_legacy_kernel_is_rejected_before_anything_runs():
    report, test = graded_part1(LEGACY_TRANSPOSE, NKI06)
    assert [r["rule"] for r in report.rejections] == ["dialect"] and report.flags == ["precheck_rejected:kernels"]
    assert test.status == TestStatus.ERROR and test.details == {"not_run": "rejected"}
    assert report.rejections[0]["message"].startswith("this assignment is written in NKI 0.6 (nki)")


def test_nki06s_compute_instructions_fail_part_1():
    """Part 1 computes only with nc_transpose, in NKI 0.6 as in the legacy dialect."""
    cheat = NKI06_TRANSPOSE.replace(b"nisa.nc_transpose(dst=block_t, data=strip_view[:, :, j])",
                                    b"nisa.tensor_tensor(dst=block_t, data1=strip_view[:, :, j], "
                                    b"data2=strip_view[:, :, j], op=nl.maximum)")
    assert cheat != NKI06_TRANSPOSE
    _, test = graded_part1(cheat, NKI06)
    assert test.status == TestStatus.FAILED and test.points == 0
    assert "matrix_transpose calls nisa.tensor_tensor, a compute instruction that is not allowed here" in test.message


# ----------------------------------------------------------------------------- accepted, and said

def test_the_nki06_transpose_passes_and_the_report_says_its_dialect():
    report, test = graded_part1(NKI06_TRANSPOSE, NKI06)
    assert report.rejections == [] and report.warnings == [] and report.flags == []
    assert test.status == TestStatus.PASSED and test.points == test.max_points
    assert report.dialect == CURRENT.name
    assert grader.view_of(report).provenance.dialect == "NKI 0.6 (nki) on Neuron SDK 2.32"
    assert grader.Report.from_json(report.to_json()).dialect == CURRENT.name
    legacy, _ = graded_part1(LEGACY_TRANSPOSE, LEGACY_SPEC)
    assert legacy.dialect == LEGACY.name and legacy.tests[0].status == TestStatus.PASSED


# ----------------------------------------------------------------------------- the references

def archived(spec, reference: str) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive(spec, reference))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


@pytest.mark.parametrize("reference", sorted(FILES))
def test_a_specs_dialect_picks_its_reference_kernels(reference):
    """Each dialect's references sit in their own folder under the same names; the archive holds
    them byte for byte, at the spec's paths."""
    assert reference_dir(CURRENT.name) == reference_dir() / "nki06"
    for spec, folder in ((NKI06, "reference_kernels/nki06"), (LEGACY_SPEC, "reference_kernels")):
        files = archived(spec, reference)
        assert files == {"part2/conv2d.py": read(f"{folder}/{FILES[reference]['fused_conv2d_maxpool']}"),
                         "part1/kernels.py": read(f"{folder}/transpose.py")}
    assert all(b"import nki\n" in data and b"neuronxcc" not in data for data in archived(NKI06, reference).values())


# ----------------------------------------------------------------------------- whole grades (slow)

@pytest.fixture(scope="module")
def optimized_nki06():
    """The NKI 0.6 optimized reference graded as a student's conv2d.py under the nki06 spec."""
    sub = submission_from_bytes("conv2d.py", read("reference_kernels/nki06/conv2d_optimized.py"), NKI06)
    return grade(sub, NKI06, GradeOptions(backend="sim", seed=7, jobs=2, **ROOMY))


def timed_only(spec):
    return dataclasses.replace(spec, tests=tuple(dataclasses.replace(t, gated_by=())
                                                 for t in spec.tests if t.timed and t.file == "conv2d"))


def test_the_nki06_optimized_reference_scores_full_marks_under_the_nki06_spec(optimized_nki06):
    report = optimized_nki06
    s = report.score
    assert (s.correctness, s.performance, s.extra_credit, s.total, s.max_total) == (10, 50, 5, 65, 70)
    assert report.flags == [] and report.rejections == [] and report.warnings == []
    assert report.missing_files == ["kernels.py"] and report.status == "completed"
    assert all(t.status == TestStatus.PASSED for t in report.tests if t.file == "conv2d.py")
    assert report.dialect == CURRENT.name and report.assignment == "asst4-trainium2-nki06"
    assert report.spec_hash == NKI06.spec_hash and report.spec_version == "1"


def test_the_nki06_optimized_reference_costs_what_the_legacy_one_does(optimized_nki06):
    """Why the nki06 spec keeps asst4-trainium2's thresholds: the two references trace the same
    instructions, so every timed p99 is within 2% of the legacy reference's."""
    sub = submission_from_bytes("conv2d.py", read("reference_kernels/conv2d_optimized.py"), timed_only(LEGACY_SPEC))
    legacy = grade(sub, timed_only(LEGACY_SPEC), GradeOptions(backend="sim", seed=7, **ROOMY))
    ours = {t.name: t.p99_us for t in optimized_nki06.tests if t.p99_us is not None}
    theirs = {t.name: t.p99_us for t in legacy.tests}
    assert set(ours) == set(theirs) and len(ours) == 8
    for name, p99 in theirs.items():
        assert abs(ours[name] / p99 - 1) < 0.02, (name, ours[name], p99)


def test_the_nki06_relaxed_reference_tiers_as_the_legacy_one():
    spec = timed_only(NKI06)
    sub = submission_from_bytes("conv2d.py", read("reference_kernels/nki06/conv2d_relaxed.py"), spec)
    report = grade(sub, spec, GradeOptions(backend="sim", seed=7, jobs=2, **ROOMY))
    by_name = {t.name: t for t in report.tests}
    assert by_name["perf_224_pool1_float16"].status == TestStatus.PARTIAL          # the relaxed tier
    for name in ("perf_224_pool2_float16", "perf_224_pool1_float32", "perf_224_pool2_float32"):
        assert by_name[name].status == TestStatus.PASSED, name
    assert all(by_name[n].status == TestStatus.FAILED for n in by_name if n.startswith("ec_"))

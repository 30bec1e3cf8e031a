"""Problems as folders (grader/problems/folder.py, issue 45): the bundled ones pass `grader
problem check`; a folder written as a course would (built below in tmp_path, nothing of ours in
it) is checked, graded through a spec naming it by path, and recorded in the report by its
sha256; bad folders and surprising solutions are said so; course code is trusted only from a
spec file's folder or an installed directory, and a spec read from text must pin it."""
from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

import grader
from grader import cli, problems
from grader.problems import folder as folders

BUNDLED = sorted(p.parent.name for p in problems.BUNDLED_DIR.glob("*/problem.toml"))

PROBLEM_TOML = """\
name = "scaled-add"
title = "x * scale + y, row tile by row tile"
version = "1"
kernel = "scaled_add"
arguments = ["x", "y", "scale"]
file = "scaled_add.py"
dialects = ["neuronxcc-nki"]
config_keys = ["rows", "cols"]

[tolerances]
float32 = { rtol = 1e-5, atol = 1e-8 }

[solutions.may_pass]
"timed_shapes.py" = ["small", "tall"]

[[tests]]
name = "small"
title = "Correctness: 128x64"
kind = "correctness"
points = 1
configs = [{ rows = 128, cols = 64, scale = 3.0 }]

[[tests]]
name = "tall"
title = "Correctness: 256x32"
kind = "correctness"
points = 1
configs = [{ rows = 256, cols = 32, scale = -0.5 }]

[[tests]]
name = "perf"
title = "Performance: 512x512"
kind = "performance"
points = 2
gated_by = ["small", "tall"]
warmup = 1
iters = 3
thresholds_us = { optimized = 40, relaxed = 80 }
configs = [{ rows = 512, cols = 512, scale = 2.0 }]
"""

REFERENCE = """\
import numpy as np


def make_inputs(config, rng):
    shape = (config["rows"], config["cols"])
    x = rng.random(shape, dtype=np.float32)
    y = rng.random(shape, dtype=np.float32)
    return [x, y], {"scale": float(config["scale"])}


def reference(inputs, kwargs):
    x, y = inputs
    return (x * np.float32(kwargs["scale"]) + y).astype(np.float32)


def work(config):
    return 0.0, 3.0 * config["rows"] * config["cols"] * 4


def output(config):
    return (config["rows"], config["cols"]), np.float32
"""

HEAD = """\
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa


@nki.jit
def scaled_add(x, y, scale):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows, cols = x.shape
"""

LOOP = """\
    for r in nl.affine_range(rows // 128):
        xt = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
        yt = nl.ndarray((128, cols), dtype=y.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=x[r * 128:(r + 1) * 128])
        nisa.dma_copy(dst=yt, src=y[r * 128:(r + 1) * 128])
        scaled = nisa.tensor_scalar(xt, nl.multiply, scale{cast})
        summed = nisa.tensor_tensor(scaled, yt, nl.add)
        nisa.dma_copy(dst=out[r * 128:(r + 1) * 128], src=summed)
"""

SOLUTIONS = {
    "correct/tiles.py": HEAD + LOOP.format(cast="") + "    return out\n",
    # returns memory it never wrote: NaN in the simulator
    "wrong/empty.py": HEAD + "    return out\n",
    # the scale rounded to bfloat16's precision: off by ~1e-3 relative
    "wrong/low_precision.py": HEAD + "    scale = float(int(scale * 256) / 256 + 1 / 512)\n" + LOOP.format(cast="")
                              + "    return out\n",
    # right on the correctness tests' shapes, and only the scale applied on the timed one's
    "wrong/timed_shapes.py": HEAD + "    if rows * cols >= 512 * 512:\n        y = x\n" + LOOP.format(cast="")
                             + "    return out\n",
}

TEMPLATE = HEAD + '    raise NotImplementedError("write scaled_add")\n'


def write_folder(root: Path, **replace: str) -> Path:
    """The course's folder, as a course would write it; `replace`: files to write instead."""
    path = root / "scaled-add"
    files = {"problem.toml": PROBLEM_TOML, "reference.py": REFERENCE, "template/scaled_add.py": TEMPLATE,
             **{f"solutions/{k}": v for k, v in SOLUTIONS.items()}, **replace}
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    return path


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return write_folder(tmp_path_factory.mktemp("course"))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_problem_folder_passes_its_check(name, capsys):
    status, out, err = run_cli(capsys, "problem", "check", str(problems.BUNDLED_DIR / name))
    assert status == 0, out + err
    assert "0 surprises" in out and problems.get(name).sha256 in out
    assert "correct:" in out and "wrong:" in out          # it graded both kinds


def test_the_built_in_problems_are_their_folders():
    for name in ("conv2d", "transpose"):
        problem = problems.get(name)
        assert problem.bundled and Path(problem.folder) == problems.BUNDLED_DIR / name
        assert problem.sha256 == folders.folder_hash(problems.BUNDLED_DIR / name)
    assert problems.get("transpose").allowed_instructions == {"nc_transpose"}
    assert problems.get("conv2d").sampled_reference is not None and problems.get("transpose").sample is None


def test_a_course_folder_passes_its_check_with_each_solution_as_expected(course, capsys):
    status, out, err = run_cli(capsys, "problem", "check", str(course))
    assert status == 0, out + err
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith(("ok ", "SURPRISE "))}
    assert lines["correct/tiles.py"].startswith("ok") and "correctness 2/2, performance 2/2" in lines["correct/tiles.py"]
    for wrong in ("wrong/empty.py", "wrong/low_precision.py", "template/scaled_add.py"):
        assert "correctness 0/2, performance 0/2" in lines[wrong], lines[wrong]
    # passes the correctness tests, as its may_pass allows, and nothing timed
    assert "correctness 2/2, performance 0/2" in lines["wrong/timed_shapes.py"]


def test_a_wrong_solution_that_earns_points_is_a_surprise(tmp_path, capsys):
    path = write_folder(tmp_path, **{"solutions/wrong/not_wrong.py": SOLUTIONS["correct/tiles.py"]})
    status, out, _ = run_cli(capsys, "problem", "check", str(path))
    assert status == 1
    line = next(line for line in out.splitlines() if "wrong/not_wrong.py" in line)
    assert line.startswith("SURPRISE") and "small passed" in line and "1 surprise in" in out


def test_a_reference_that_ignores_the_seed_or_its_declared_output_is_a_surprise(tmp_path, capsys):
    fixed = REFERENCE.replace("def make_inputs(config, rng):", "def make_inputs(config, rng):\n"
                              "    rng = np.random.default_rng(0)")
    lying = fixed.replace("return (config[\"rows\"], config[\"cols\"]), np.float32",
                          "return (config[\"cols\"], config[\"rows\"]), np.float32")
    path = write_folder(tmp_path, **{"reference.py": lying})
    status, out, _ = run_cli(capsys, "problem", "check", str(path))
    assert status == 1
    surprises = [line for line in out.splitlines() if line.startswith("SURPRISE")]
    assert any(line.split()[1] == "inputs" and "the same inputs" in line for line in surprises)
    assert any(line.split()[1] == "output" for line in surprises)


def test_loose_tolerances_and_foreign_imports_are_surprises(tmp_path, capsys):
    toml = PROBLEM_TOML.replace("float32 = { rtol = 1e-5, atol = 1e-8 }", "float32 = { rtol = 1e-2, atol = 1e-8 }")
    path = write_folder(tmp_path, **{"problem.toml": toml, "reference.py": "import subprocess\n" + REFERENCE})
    status, out, _ = run_cli(capsys, "problem", "check", str(path))
    assert status == 1
    assert "accepts results from bfloat16 operands" in out and "subprocess" in out


@pytest.mark.parametrize("replace, reason, remedy", [
    ({"problem.toml": PROBLEM_TOML.replace('version = "1"', 'version = "1"\nkernal = "x"')},
     "unknown keys kernal", "Use only"),
    ({"reference.py": REFERENCE.replace("def work(config):", "def effort(config):")},
     "does not define work", "work(config)"),
    ({"reference.py": REFERENCE + "\nraise RuntimeError('half written')\n"},
     "reference.py failed to load: RuntimeError: half written", "Fix reference.py"),
    ({"problem.toml": PROBLEM_TOML.replace('dialects = ["neuronxcc-nki"]', 'dialects = ["cuda"]')},
     "dialects must be a list of", "Name the NKI dialects"),
    ({"problem.toml": PROBLEM_TOML.replace("rtol = 1e-5", "rtol = 5")}, "tolerances.float32 must be", "[tolerances]"),
])
def test_a_bad_folder_says_what_is_wrong_and_how_to_fix_it(tmp_path, capsys, replace, reason, remedy):
    path = write_folder(tmp_path, **replace)
    status, out, err = run_cli(capsys, "problem", "check", str(path))
    assert status == cli.EXIT_BAD_INPUT and not out
    assert reason in err and remedy in err and str(path) in err
    with pytest.raises(grader.GraderInputError) as info:
        folders.load(path)
    assert info.value.remedy


def test_a_folder_without_problem_toml_is_an_input_error(tmp_path, capsys):
    status, _, err = run_cli(capsys, "problem", "check", str(tmp_path))
    assert status == cli.EXIT_BAD_INPUT and "there is no problem.toml" in err


def spec_text(problem_ref: str, pin: str | None = None) -> str:
    pinned = f'problem_sha256 = {{ scaled-add = "{pin}" }}\n' if pin else ""
    tests = PROBLEM_TOML.split("[[tests]]", 1)[1]
    return (f'assignment = "course-hw1"\nspec_version = "1"\nthresholds_version = "1"\n{pinned}'
            f'[files.hw]\narchive_path = "hw1/scaled_add.py"\nfilename = "scaled_add.py"\n'
            f'functions = {{ scaled_add = ["x", "y", "scale"] }}\n'
            f'[tolerances]\nfloat32 = {{ rtol = 1e-5, atol = 1e-8 }}\n'
            + "".join(f'[[tests]]\nfile = "hw"\nproblem = "{problem_ref}"{block}'
                      for block in ("[[tests]]" + tests).split("[[tests]]")[1:]))


def test_a_spec_naming_a_folder_grades_with_it_and_the_report_records_its_hash(course, tmp_path, capsys):
    spec_path = course.parent / "hw1.toml"
    spec_path.write_text(spec_text("./scaled-add"))
    solution = tmp_path / "scaled_add.py"
    solution.write_text(SOLUTIONS["correct/tiles.py"])
    report_path = tmp_path / "report.json"
    status, out, err = run_cli(capsys, "grade", str(solution), "--assignment", str(spec_path), "--backend", "sim",
                               "--seed", "7", "--json", str(report_path))
    assert status == 0, err
    report = json.loads(report_path.read_text())
    sha = folders.folder_hash(course)
    assert report["problem_hashes"] == {"scaled-add": sha}
    assert f"problems scaled-add {sha[:12]}" in out          # the terminal report names the folder it graded
    assert report["score"]["correctness"] == 2 and report["score"]["performance"] == 2
    # the bundled problems' hashes too, in a bundled spec's report (a field with a default: old reports read)
    assert grader.load_spec("asst4-trainium2").problem_hashes == {
        "conv2d": problems.get("conv2d").sha256, "transpose": problems.get("transpose").sha256}
    old = {k: v for k, v in report.items() if k != "problem_hashes"}
    assert grader.Report.from_json(old).problem_hashes == {}


def test_a_spec_from_text_cannot_reach_a_folder_by_path(course):
    """A stored spec row has no file: a folder path in it is refused, never looked up from
    wherever the worker happens to run."""
    with pytest.raises(grader.SpecError) as info:
        grader.spec_from_toml(spec_text(str(course)), "row")
    assert "is a folder path, but this spec is text" in info.value.reason and info.value.remedy


def test_an_installed_folder_must_be_pinned_in_a_spec_from_text(course, monkeypatch):
    monkeypatch.setenv(problems.INSTALLED_ENV, str(course.parent))
    with pytest.raises(grader.SpecError) as info:
        grader.spec_from_toml(spec_text("scaled-add"), "row")
    sha = folders.folder_hash(course)
    assert "must pin it" in info.value.reason and sha in info.value.remedy
    spec = grader.spec_from_toml(spec_text("scaled-add", pin=sha), "row")
    assert spec.problem_hashes == {"scaled-add": sha}
    assert spec.test("small").problem == f"scaled-add@{sha[:12]}"


def test_a_pinned_folder_that_changed_is_refused(tmp_path, monkeypatch):
    path = write_folder(tmp_path)
    pin = folders.folder_hash(path)
    (path / "reference.py").write_text(REFERENCE.replace("+ y)", "+ y + 0)"))
    monkeypatch.setenv(problems.INSTALLED_ENV, str(tmp_path))
    with pytest.raises(grader.SpecError) as info:
        grader.spec_from_toml(spec_text("scaled-add", pin=pin), "row")
    assert "is not the one this spec pins" in info.value.reason and folders.folder_hash(path) in info.value.reason


def test_the_reference_runs_in_the_grader_process_never_in_a_child(tmp_path):
    """reference.py is course code on the trusted side: it answers in the grading process, and
    its folder (outside the grader's checkout) is not in the sandboxed child's view."""
    marks = tmp_path / "pids"
    marks.mkdir()
    spy = REFERENCE.replace("def reference(inputs, kwargs):\n",
                            "def reference(inputs, kwargs):\n    import os\n"
                            f"    open(os.path.join({str(marks)!r}, str(os.getpid())), 'w').close()\n")
    path = write_folder(tmp_path, **{"reference.py": spy})
    probe = HEAD + ("    import os\n    assert not os.path.exists(" + repr(str(path)) + "), 'the folder is visible'\n"
                    + LOOP.format(cast="") + "    return out\n")
    from grader.problems.check import spec_for
    spec = spec_for(folders.load(path), "neuronxcc-nki")
    report = grader.grade(grader.submission_from_bytes("scaled_add.py", probe.encode(), spec), spec,
                          grader.GradeOptions(backend="sim", seed=3, run_precheck=False))
    assert report.score.correctness == 2, [t.message for t in report.tests]
    assert {p.name for p in marks.iterdir()} == {str(os.getpid())}


def test_problem_check_is_in_the_command_line():
    help_text = cli.build_parser().format_help()
    assert "problem" in help_text
    check_help = textwrap.dedent(cli.build_parser()._subparsers._group_actions[0].choices["problem"].format_help())
    assert "check" in check_help


def test_the_site_refuses_to_store_a_spec_its_workers_could_not_read_back(course, db, monkeypatch):
    """A spec file naming a folder by path grades from the command line, but a stored row is
    text alone: storing it is refused at once, not when a worker first grades with it."""
    from store import specs as stored_specs
    spec_path = course.parent / "hw1-stored.toml"
    spec_path.write_text(spec_text("./scaled-add"))
    spec = grader.load_spec(str(spec_path))
    with pytest.raises(grader.SpecError, match="is a folder path, but this spec is text"):
        stored_specs.stored(db, spec)
    pinned = course.parent / "hw1-pinned.toml"
    pinned.write_text(spec_text("scaled-add", pin=folders.folder_hash(course)))
    monkeypatch.setenv(problems.INSTALLED_ENV, str(course.parent))
    row = stored_specs.stored(db, grader.load_spec(str(pinned)))
    assert grader.spec_from_toml(row.toml).problem_hashes == {"scaled-add": folders.folder_hash(course)}


def test_a_gradescope_zip_carries_the_course_folder_its_spec_names(course, tmp_path, capsys):
    """`grader gradescope build` puts the folder beside spec.toml as the spec names it (what the
    grader reads, which the folder's sha256 covers), never its solutions or template; the spec
    in the unpacked zip loads it with the same hash. A folder the zip cannot hold is refused."""
    import zipfile
    spec_path = course.parent / "hw1.toml"
    spec_path.write_text(spec_text("./scaled-add"))
    out = tmp_path / "autograder.zip"
    status, _, err = run_cli(capsys, "gradescope", "build", "--assignment", str(spec_path), "--mode", "local",
                             "-o", str(out))
    assert status == 0, err
    names = zipfile.ZipFile(out).namelist()
    assert {"scaled-add/problem.toml", "scaled-add/reference.py"} <= set(names)
    assert not [n for n in names if "solutions" in n or "template" in n]
    unpacked = tmp_path / "source"
    zipfile.ZipFile(out).extractall(unpacked)
    assert grader.load_spec(str(unpacked / "spec.toml")).problem_hashes == {"scaled-add": folders.folder_hash(course)}

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "hw1.toml").write_text(spec_text(os.path.relpath(course, outside)))      # "../../.../scaled-add"
    status, _, err = run_cli(capsys, "gradescope", "build", "--assignment", str(outside / "hw1.toml"), "--mode",
                             "local", "-o", str(tmp_path / "refused.zip"))
    assert status == 2 and "is not inside the spec file's folder" in err and not (tmp_path / "refused.zip").exists()

"""A problem folder written outside this project (issue 45's first "Done when"): a row softmax
written by someone who had read only README.md, docs/staff.md and docs/students.md, kept as it
was written under tests/outside_problems/ (its kernels from the NKI API reference: a legacy and
an NKI 0.6 one, and three wrong ones). It passes `grader problem check` and grades through a spec
naming it, in both dialects, with no change to our code; a folder accepting both dialects keeps
each dialect's starter (template/ and template/nki06/), and a starter is never offered or
accepted in the other dialect."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import grader
from grader import cli
from grader.problems import check as checks
from grader.problems import folder as folders

OUTSIDE = Path(__file__).resolve().parents[1] / "outside_problems"
FOLDER = OUTSIDE / "softmax"
SPEC = OUTSIDE / "softmax-fall.toml"


def test_the_outside_folder_passes_its_check(capsys):
    assert cli.main(["problem", "check", str(FOLDER)]) == 0
    out = capsys.readouterr().out
    assert "0 surprises" in out and folders.folder_hash(FOLDER) in out
    for row in ("correct/softmax_legacy.py", "correct/softmax_nki06.py", "wrong/no_max.py", "wrong/wrong_axis.py",
                "wrong/empty.py", "template/softmax.py", "template/nki06/softmax.py"):
        assert row in out


@pytest.mark.parametrize("dialect, solution, wrong", [
    ("neuronxcc-nki", "correct/softmax_legacy.py", "wrong/no_max.py"),
    ("nki-0.6", "correct/softmax_nki06.py", None)])
def test_a_spec_naming_the_folder_grades_it_in_either_dialect(tmp_path, dialect, solution, wrong):
    text = SPEC.read_text()
    if dialect == "nki-0.6":
        text = text.replace('platform = "trn2"', 'platform = "trn2"\ndialect = "nki-0.6"')
    (tmp_path / "softmax").symlink_to(FOLDER)
    spec_path = tmp_path / "course.toml"
    spec_path.write_text(text)
    (tmp_path / "softmax.py").write_bytes((FOLDER / "solutions" / solution).read_bytes())
    out = tmp_path / "report.json"
    assert cli.main(["grade", str(tmp_path / "softmax.py"), "--assignment", str(spec_path), "--seed", "3",
                     "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["score"]["total"] == 10
    assert report["problem_hashes"] == {"softmax": folders.folder_hash(FOLDER)}
    if wrong:
        (tmp_path / "softmax.py").write_bytes((FOLDER / "solutions" / wrong).read_bytes())
        assert cli.main(["grade", str(tmp_path / "softmax.py"), "--assignment", str(spec_path), "--seed", "3",
                         "--json", str(out)]) == 0
        failed = {t["name"]: t["message"] for t in json.loads(out.read_text())["tests"]}
        # no max subtracted: exp overflows, and the message names an overflow, not only unwritten memory
        assert "NaN or infinite" in failed["small"] and "an overflow" in failed["small"]


def test_each_dialect_gets_its_own_starter(tmp_path):
    assert folders.starter(FOLDER, "softmax.py", "neuronxcc-nki") == FOLDER / "template" / "softmax.py"
    assert folders.starter(FOLDER, "softmax.py", "nki-0.6") == FOLDER / "template" / "nki06" / "softmax.py"
    # a folder of one dialect, NKI 0.6, keeps its starter at template/<file>
    only = tmp_path / "only06"
    shutil.copytree(FOLDER, only)
    shutil.move(only / "template" / "nki06" / "softmax.py", only / "template" / "softmax.py")
    assert folders.starter(only, "softmax.py", "nki-0.6") == only / "template" / "softmax.py"
    assert folders.starter(only, "softmax.py", "neuronxcc-nki") is None      # never the other dialect's


def test_a_dialect_without_its_starter_or_a_misplaced_starter_is_a_surprise(tmp_path):
    copy = tmp_path / "softmax"
    shutil.copytree(FOLDER, copy)
    (copy / "template" / "nki06" / "softmax.py").unlink()
    _, rows = checks.check(copy)
    missing = [r for r in rows if not r.ok]
    assert [(r.what, r.expected, r.got) for r in missing] == [
        ("template/nki06/softmax.py", "a starter softmax.py in nki-0.6", "none")]
    # the legacy starter put where NKI 0.6's belongs
    shutil.copy(copy / "template" / "softmax.py", copy / "template" / "nki06" / "softmax.py")
    _, rows = checks.check(copy)
    wrong = [r for r in rows if not r.ok]
    assert [r.what for r in wrong] == ["template/nki06/softmax.py", "template/nki06/softmax.py"]
    assert "written in neuronxcc-nki, but template/nki06/ holds nki-0.6 starters" in wrong[0].got


def test_a_folder_named_without_a_slash_is_read_as_a_name_and_the_error_says_so(tmp_path, monkeypatch):
    """The outsider's first spec wrote problem = "softmax" for the folder beside it: that is a
    problem's name, and the error names the installed directories and the path to write instead."""
    monkeypatch.delenv("NKI_GRADER_PROBLEM_DIRS", raising=False)
    (tmp_path / "softmax").symlink_to(FOLDER)
    spec_path = tmp_path / "course.toml"
    spec_path.write_text(SPEC.read_text().replace('problem = "./softmax"', 'problem = "softmax"'))
    with pytest.raises(grader.SpecError) as info:
        grader.load_spec(str(spec_path))
    assert "NKI_GRADER_PROBLEM_DIRS (none: NKI_GRADER_PROBLEM_DIRS is not set)" in info.value.reason
    assert '"./softmax"' in info.value.remedy


def test_the_docs_example_problem_toml_is_a_problem_folder(tmp_path):
    """docs/staff.md's problem.toml, with the outside folder's reference.py and starters, loads."""
    import re
    docs = (Path(__file__).resolve().parents[2] / "docs" / "staff.md").read_text()
    (example,) = re.findall(r"```toml\n(.*?)```", docs, re.S)
    folder = tmp_path / "softmax"
    shutil.copytree(FOLDER, folder)
    (folder / "problem.toml").write_text(example)
    loaded = folders.load(folder)
    assert loaded.problem.dialects == ("neuronxcc-nki", "nki-0.6") and loaded.problem.arguments == ("x",)
    assert [t["name"] for t in loaded.tests] == ["softmax_float32"]


def test_a_gzip_stream_inflating_past_the_folder_limit_or_too_many_entries_are_refused_as_read(tmp_path):
    """The attacks on a .tar.gz: a stream of a few KiB inflating to 70 MiB is refused at the cap
    while it is being inflated, never read whole; an archive of 300 empty files is refused at its
    201st entry. Nothing is written."""
    import gzip
    import io
    import tarfile

    import pytest

    from grader.problems import archive
    big = io.BytesIO()
    with tarfile.open(fileobj=big, mode="w") as tf:
        info = tarfile.TarInfo("softmax/problem.toml")
        info.size = 70 << 20
        tf.addfile(info, io.BytesIO(bytes(info.size)))
    bomb = gzip.compress(big.getvalue(), compresslevel=9)
    assert len(bomb) < 256 << 10
    with pytest.raises(archive.ProblemArchiveError, match=r"is over 64 MiB unpacked \(more than 65 MiB\)"):
        archive.unpack_upload(bomb, "softmax.tar.gz", tmp_path / "into")
    many = io.BytesIO()
    with tarfile.open(fileobj=many, mode="w:gz") as tf:
        for i in range(300):
            tf.addfile(tarfile.TarInfo(f"softmax/empty{i}.py"), io.BytesIO(b""))
    with pytest.raises(archive.ProblemArchiveError, match="holds more than 200 files and folders"):
        archive.unpack_upload(many.getvalue(), "softmax.tar.gz", tmp_path / "into")
    assert not (tmp_path / "into").exists()


def test_an_upload_inflating_past_the_file_limit_is_refused_before_it_is_unpacked(tmp_path):
    """A zip of a few KiB whose member inflates to 3 MiB (a zip bomb in small): refused by its
    declared size, nothing written."""
    import io
    import zipfile

    import pytest

    from grader.problems import archive
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("problem.toml", "name = 'x'\n")
        zf.writestr("reference.py", b"\0" * (3 << 20))
    assert len(buf.getvalue()) < 64 << 10
    with pytest.raises(archive.ProblemArchiveError, match="over 2 MiB"):
        archive.unpack_upload(buf.getvalue(), "bomb.zip", tmp_path / "into")
    assert not (tmp_path / "into").exists() or not any((tmp_path / "into").rglob("*"))

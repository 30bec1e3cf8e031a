"""Upload handling: valid single files and archives, and a suite of malformed uploads, each
of which must fail with a SubmissionError whose reason says what is wrong."""
import hashlib
import io
import pickle
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from grader import spec as specs
from grader.submission import (MAX_SOURCE_BYTES, MAX_UPLOAD_BYTES, Submission, SubmissionError,
                               load_submission, submission_from_bytes)

ROOT = Path(__file__).resolve().parents[2]
CONV = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()
KERNELS = (ROOT / "student_template" / "kernels.py").read_bytes()
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def spec():
    return specs.load("asst4-trainium2")


@pytest.fixture(scope="module")
def spec2024():
    return specs.load("asst4-trainium")


@pytest.fixture(scope="module")
def conv_required_spec():
    """asst4-trainium2 as a course could set it: conv2d.py required, kernels.py optional."""
    import tomllib
    data = tomllib.loads((specs.SPEC_DIR / "asst4-trainium2.toml").read_text())
    data["files"]["conv2d"]["optional"] = False
    return specs.parse(data)


# ----------------------------------------------------------------------------- builders

def tar_bytes(entries, mode="w:gz") -> bytes:
    """entries: (name, bytes) pairs or ready TarInfo objects (header only)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tf.addfile(entry)
            else:
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zip_bytes(entries, compression=zipfile.ZIP_DEFLATED) -> bytes:
    """entries: (name, bytes) pairs or (ZipInfo, bytes) pairs."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()


def tar_info(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def course_archive(mode="w:gz"):
    return tar_bytes([("part1/kernels.py", KERNELS), ("part2/conv2d.py", CONV)], mode)


def fails(name, data, spec, corrupt=False) -> SubmissionError:
    with pytest.raises(SubmissionError) as info:
        submission_from_bytes(name, data, spec)
    err = info.value
    # each problem gets its own message, never wrapped into another one
    assert ("is corrupt" in err.reason) == corrupt, err.reason
    assert str(err).count(err.remedy) == 1
    return err


# ----------------------------------------------------------------------------- the exception

def test_submission_error_carries_reason_and_remedy():
    err = SubmissionError("conv2d.py is empty", "Upload the file with your kernel in it.")
    assert isinstance(err, ValueError)
    assert err.reason == "conv2d.py is empty"
    assert err.remedy == "Upload the file with your kernel in it."
    assert str(err) == "conv2d.py is empty. Upload the file with your kernel in it."
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.reason, copy.remedy, str(copy)) == (err.reason, err.remedy, str(err))


def test_every_error_message_has_both_parts(spec):
    err = fails("conv2d.py", b"", spec)
    assert err.reason in str(err) and err.remedy in str(err)
    assert err.remedy


# ----------------------------------------------------------------------------- valid uploads

def test_single_conv2d_file_from_disk(tmp_path, spec):
    path = tmp_path / "conv2d.py"
    path.write_bytes(CONV)
    sub = load_submission(path, spec)
    assert isinstance(sub, Submission)
    assert sub.files == {"conv2d": CONV.decode()}
    assert sub.filenames == {"conv2d": "conv2d.py"}
    assert sub.sha256 == hashlib.sha256(CONV).hexdigest()
    assert sub.origin == "conv2d.py"


def test_upload_name_with_client_path_keeps_the_base_name(spec):
    sub = submission_from_bytes("C:\\Users\\me\\asst4\\conv2d.py", CONV, spec)
    assert sub.origin == "conv2d.py" and "conv2d" in sub.files


def test_the_2024_spec_accepts_conv2d_alone(spec2024):
    sub = submission_from_bytes("conv2d.py", CONV, spec2024)
    assert list(sub.files) == ["conv2d"]


@pytest.mark.parametrize("name,build", [
    ("asst4.tar.gz", lambda: course_archive("w:gz")),
    ("asst4.tgz", lambda: course_archive("w:gz")),
    ("asst4.tar", lambda: course_archive("w")),
    ("asst4.zip", lambda: zip_bytes([("part1/kernels.py", KERNELS), ("part2/conv2d.py", CONV)])),
])
def test_course_archive_in_every_format(name, build, spec):
    data = build()
    sub = submission_from_bytes(name, data, spec)
    assert sub.files == {"conv2d": CONV.decode(), "kernels": KERNELS.decode()}
    assert sub.filenames == {"conv2d": "part2/conv2d.py", "kernels": "part1/kernels.py"}
    assert sub.sha256 == hashlib.sha256(data).hexdigest()
    assert sub.origin == name


def test_archive_from_disk(tmp_path, spec):
    path = tmp_path / "asst4.tar.gz"
    path.write_bytes(course_archive())
    assert set(load_submission(str(path), spec).files) == {"conv2d", "kernels"}


def test_files_at_the_archive_root(spec):
    sub = submission_from_bytes("s.zip", zip_bytes([("conv2d.py", CONV), ("kernels.py", KERNELS)]), spec)
    assert sub.filenames == {"conv2d": "conv2d.py", "kernels": "kernels.py"}


@pytest.mark.parametrize("conv_path,kernels_path", [
    ("asst4-trainium2/part2/conv2d.py", "asst4-trainium2/part1/kernels.py"),
    ("submission/conv2d.py", "submission/kernels.py"),
])
def test_files_under_one_top_level_folder(conv_path, kernels_path, spec):
    sub = submission_from_bytes("s.tar.gz", tar_bytes([(conv_path, CONV), (kernels_path, KERNELS)]), spec)
    assert sub.filenames == {"conv2d": conv_path, "kernels": kernels_path}


def test_dot_prefixed_paths_directories_and_extra_members(spec):
    folder = tar_info("./part2", tarfile.DIRTYPE)
    data = tar_bytes([tar_info(".", tarfile.DIRTYPE), folder, ("./part2/conv2d.py", CONV),
                      ("./writeup.pdf", b"%PDF-1.4 not python"), ("./part2/notes.txt", b"hi"),
                      ("./__MACOSX/part2/._conv2d.py", b"\x00\x05\x16\x07 resource fork")])
    sub = submission_from_bytes("asst4.tar.gz", data, spec)
    assert sub.filenames == {"conv2d": "./part2/conv2d.py"}


def test_optional_file_may_be_absent_from_an_archive(spec):
    sub = submission_from_bytes("a.tar.gz", tar_bytes([("part2/conv2d.py", CONV)]), spec)
    assert list(sub.files) == ["conv2d"]


def test_files_the_spec_does_not_grade_are_ignored(spec2024):
    sub = submission_from_bytes("a.tar.gz", course_archive(), spec2024)
    assert list(sub.files) == ["conv2d"]


def test_the_course_path_wins_over_a_copy_at_the_root(spec):
    stale = CONV.replace(b"Optimized reference", b"An older copy")
    data = tar_bytes([("conv2d.py", stale), ("part2/conv2d.py", CONV)])
    sub = submission_from_bytes("a.tar.gz", data, spec)
    assert sub.filenames["conv2d"] == "part2/conv2d.py" and sub.files["conv2d"] == CONV.decode()


def test_archive_format_is_sniffed_not_trusted_from_the_name(spec):
    sub = submission_from_bytes("asst4.zip", course_archive("w:gz"), spec)
    assert set(sub.files) == {"conv2d", "kernels"}


def test_utf8_byte_order_mark_is_dropped(spec):
    sub = submission_from_bytes("conv2d.py", b"\xef\xbb\xbf" + CONV, spec)
    assert sub.files["conv2d"] == CONV.decode()
    assert sub.sha256 == hashlib.sha256(b"\xef\xbb\xbf" + CONV).hexdigest()


@pytest.mark.parametrize("signature", [
    "def fused_conv2d_maxpool(X, W, bias, pool_size=1, tile_rows=2):",
    "def fused_conv2d_maxpool(X, W, bias, pool_size, *args, debug=False, **kwargs):",
    "def fused_conv2d_maxpool(X, W, bias, pool_size: int = 1) -> None:",
])
def test_extra_trailing_parameters_with_defaults_are_fine(signature, spec):
    source = f"import neuronxcc.nki as nki\n\n@nki.jit\n{signature}\n    return X\n"
    assert submission_from_bytes("conv2d.py", source.encode(), spec).files["conv2d"] == source


def test_the_last_definition_counts(spec):
    """Python keeps the second definition, so the signature check reads that one: the first, with
    too few parameters, is not what runs and must not refuse the file."""
    source = b"def fused_conv2d_maxpool(X):\n    pass\n\ndef fused_conv2d_maxpool(X, W, bias, pool_size=1):\n    pass\n"
    assert submission_from_bytes("conv2d.py", source, spec).files["conv2d"] == source.decode()
    reversed_order = b"def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n    pass\n\ndef fused_conv2d_maxpool(X):\n    pass\n"
    with pytest.raises(SubmissionError):
        submission_from_bytes("conv2d.py", reversed_order, spec)


# ----------------------------------------------------------------------------- file names and types

@pytest.mark.parametrize("name", ["asst4.rar", "conv2d.txt", "conv2d", "asst4.7z", "notes.pdf"])
def test_unknown_extension(name, spec):
    err = fails(name, CONV, spec)
    assert "not a file type the grader accepts" in err.reason
    assert ".tar.gz" in err.remedy and ".zip" in err.remedy and "conv2d.py" in err.remedy


@pytest.mark.parametrize("name", ["conv2d_v2.py", "Conv2d.py", "solution.py"])
def test_unexpected_py_name(name, spec):
    err = fails(name, CONV, spec)
    assert name in err.reason and "expected conv2d.py or kernels.py" in err.reason


def test_kernels_py_alone_is_a_submission(spec):
    sub = submission_from_bytes("kernels.py", KERNELS, spec)
    assert set(sub.files) == {"kernels"} and sub.filenames == {"kernels": "kernels.py"}


def test_optional_file_alone_is_not_a_submission_when_another_is_required(conv_required_spec):
    err = fails("kernels.py", KERNELS, conv_required_spec)
    assert "conv2d.py is required" in err.reason


def test_a_file_this_spec_does_not_know(spec2024):
    err = fails("kernels.py", KERNELS, spec2024)
    assert "expected conv2d.py" in err.reason


# ----------------------------------------------------------------------------- sizes

def test_upload_over_16_mib(spec):
    err = fails("asst4.tar.gz", b"\0" * (MAX_UPLOAD_BYTES + 1), spec)
    assert "16 MiB limit" in err.reason


def test_size_is_checked_before_reading(tmp_path, spec, monkeypatch):
    path = tmp_path / "asst4.tar.gz"
    with path.open("wb") as f:
        f.truncate(MAX_UPLOAD_BYTES + 1)         # sparse: nothing is written

    def never(*args, **kwargs):
        raise AssertionError("the file was opened although its size is over the limit")

    monkeypatch.setattr(Path, "open", never)
    with pytest.raises(SubmissionError) as info:
        load_submission(path, spec)
    assert "16 MiB limit" in info.value.reason


def test_missing_path(tmp_path, spec):
    with pytest.raises(SubmissionError) as info:
        load_submission(tmp_path / "nope.tar.gz", spec)
    assert "Cannot read" in info.value.reason


def test_single_py_over_1_mib(spec):
    data = CONV + b"#" * MAX_SOURCE_BYTES
    err = fails("conv2d.py", data, spec)
    assert "conv2d.py" in err.reason and "1 MiB limit" in err.reason


def test_archived_py_over_1_mib(spec):
    data = tar_bytes([("part2/conv2d.py", CONV + b"\n" + b"#" * MAX_SOURCE_BYTES)])
    err = fails("a.tar.gz", data, spec)
    assert "part2/conv2d.py" in err.reason and "1 MiB limit" in err.reason


def test_declared_sizes_over_32_mib_are_rejected_from_the_headers(spec):
    huge = tarfile.TarInfo("part2/data.bin")
    huge.size = 40 * MiB                          # header only: the data is not even there
    data = huge.tobuf(tarfile.GNU_FORMAT) + b"\0" * 1024
    err = fails("a.tar", data, spec)
    assert "32 MiB limit when unpacked" in err.reason


def test_gzip_bomb_stops_at_the_cap(spec):
    data = tar_bytes([("part2/conv2d.py", CONV), ("zeros.bin", bytes(40 * MiB))])
    assert len(data) < MiB
    err = fails("a.tar.gz", data, spec)
    assert "32 MiB limit when unpacked" in err.reason


def test_zip_bomb_is_rejected(spec):
    data = zip_bytes([("part2/conv2d.py", CONV), ("zeros.bin", bytes(33 * MiB))])
    assert len(data) < MiB
    err = fails("a.zip", data, spec)
    assert "32 MiB limit when unpacked" in err.reason


@pytest.mark.parametrize("fmt", ["tar", "zip"])
def test_too_many_members(fmt, spec):
    entries = [("part2/conv2d.py", CONV)] + [(f"junk/{i}.txt", b"x") for i in range(64)]
    data = tar_bytes(entries) if fmt == "tar" else zip_bytes(entries)
    err = fails(f"a.{'tar.gz' if fmt == 'tar' else 'zip'}", data, spec)
    assert err.reason == f"The archive {'a.tar.gz' if fmt == 'tar' else 'a.zip'} has more than 64 members"


# ----------------------------------------------------------------------------- encodings and content

def test_not_utf8_says_file_and_offset(spec):
    data = b"# caf\xe9\nimport numpy\n"
    err = fails("conv2d.py", data, spec)
    assert "conv2d.py is not valid UTF-8" in err.reason
    assert "byte offset 5" in err.reason and "line 1" in err.reason and "0xe9" in err.reason


def test_not_utf8_inside_an_archive_names_the_member(spec):
    data = tar_bytes([("part2/conv2d.py", CONV), ("part1/kernels.py", b"x = 1\n# \xff\xfe\n")])
    err = fails("a.tar.gz", data, spec)
    assert "part1/kernels.py is not valid UTF-8" in err.reason and "byte offset 8" in err.reason
    assert "line 2" in err.reason


@pytest.mark.parametrize("content", [b"", b"   \n\n\t\n"])
def test_empty_file(content, spec):
    err = fails("conv2d.py", content, spec)
    assert err.reason == "conv2d.py is empty"


def test_empty_member_in_archive(spec):
    err = fails("a.tar.gz", tar_bytes([("part2/conv2d.py", b"")]), spec)
    assert err.reason == "part2/conv2d.py is empty"


def test_empty_archive_upload(spec):
    err = fails("asst4.tar.gz", b"", spec)
    assert "asst4.tar.gz is empty" in err.reason


def test_null_byte(spec):
    err = fails("conv2d.py", b"x = 1\n\x00\n", spec)
    assert "null byte at byte offset 6" in err.reason


@pytest.mark.parametrize("source", [
    "import numpy as np\n\ndef fused_conv2d_maxpool(X, W, bias, pool_size=1:\n    return X\n",
    "def fused_conv2d_maxpool(X, W, bias, pool_size=1):\nreturn X\n",
    "x = 1\nreturn x\n",                        # found by compile(), not by the parser
])
def test_syntax_error_gives_file_line_and_compile_message(source, spec):
    with pytest.raises(SyntaxError) as expected:
        compile(source, "conv2d.py", "exec")
    err = fails("conv2d.py", source.encode(), spec)
    assert err.reason == f"conv2d.py has a syntax error on line {expected.value.lineno}: {expected.value.msg}"


def test_syntax_error_in_archive_names_the_member(spec):
    data = tar_bytes([("part2/conv2d.py", CONV), ("part1/kernels.py", b"def matrix_transpose(a_tensor)\n")])
    err = fails("a.tar.gz", data, spec)
    assert err.reason.startswith("part1/kernels.py has a syntax error on line 1: ")


# ----------------------------------------------------------------------------- required functions

def test_missing_function(spec):
    err = fails("conv2d.py", b"import numpy as np\n\ndef conv(X, W, bias, pool_size=1):\n    pass\n", spec)
    assert "does not define fused_conv2d_maxpool" in err.reason
    assert "def fused_conv2d_maxpool(X, W, bias, pool_size, ...)" in err.remedy


def test_function_inside_a_block_is_not_module_level(spec):
    source = b"if True:\n    def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n        pass\n"
    err = fails("conv2d.py", source, spec)
    assert "does not define fused_conv2d_maxpool at module level" in err.reason and "line 2" in err.reason


def test_function_bound_by_assignment(spec):
    source = b"def impl(X, W, bias, pool_size=1):\n    pass\n\nfused_conv2d_maxpool = impl\n"
    err = fails("conv2d.py", source, spec)
    assert "not a def" in err.reason and "line 4" in err.reason


def test_async_def(spec):
    err = fails("conv2d.py", b"async def fused_conv2d_maxpool(X, W, bias, pool_size=1):\n    pass\n", spec)
    assert "async def" in err.reason


def test_missing_function_in_optional_file(spec):
    data = tar_bytes([("part2/conv2d.py", CONV), ("part1/kernels.py", b"def transpose(a_tensor):\n    pass\n")])
    err = fails("a.tar.gz", data, spec)
    assert "part1/kernels.py does not define matrix_transpose" in err.reason


@pytest.mark.parametrize("params", [
    "X, W, b, pool_size=1",           # renamed
    "X, W, bias",                     # missing
    "X, bias, W, pool_size=1",        # reordered
    "W, X, bias, pool_size=1",
    "*args, **kwargs",
])
def test_wrong_leading_parameters(params, spec):
    source = f"def fused_conv2d_maxpool({params}):\n    pass\n"
    err = fails("conv2d.py", source.encode(), spec)
    assert f"fused_conv2d_maxpool({params})" in err.reason
    assert "does not start with the parameters (X, W, bias, pool_size)" in err.reason


@pytest.mark.parametrize("params,extra", [
    ("X, W, bias, pool_size, tile", "tile"),
    ("X, W, bias, pool_size=1, *, tile", "tile"),
])
def test_extra_parameter_without_default(params, extra, spec):
    err = fails("conv2d.py", f"def fused_conv2d_maxpool({params}):\n    pass\n".encode(), spec)
    assert f"adds parameter {extra!r} without a default value" in err.reason


def test_positional_only_parameters(spec):
    err = fails("conv2d.py", b"def fused_conv2d_maxpool(X, W, bias, pool_size=1, /):\n    pass\n", spec)
    assert "positional-only" in err.reason


# ----------------------------------------------------------------------------- unsafe archive members

@pytest.mark.parametrize("fmt", ["tar", "zip"])
@pytest.mark.parametrize("name", ["/part2/conv2d.py", "/etc/passwd", "C:/Users/x/conv2d.py", "\\\\server\\x.py"])
def test_absolute_member_path(fmt, name, spec):
    entries = [("part2/conv2d.py", CONV), (name, b"x = 1\n")]
    data = tar_bytes(entries) if fmt == "tar" else zip_bytes(entries)
    err = fails("a.tar.gz" if fmt == "tar" else "a.zip", data, spec)
    assert "absolute path" in err.reason and repr(name) in err.reason


@pytest.mark.parametrize("fmt", ["tar", "zip"])
@pytest.mark.parametrize("name", ["../part2/conv2d.py", "part2/../../evil.py", "a\\..\\..\\b.py"])
def test_dotdot_member_path(fmt, name, spec):
    entries = [("part2/conv2d.py", CONV), (name, b"x = 1\n")]
    data = tar_bytes(entries) if fmt == "tar" else zip_bytes(entries)
    err = fails("a.tar.gz" if fmt == "tar" else "a.zip", data, spec)
    assert "'..'" in err.reason and repr(name) in err.reason


@pytest.mark.parametrize("kind,word", [
    (tarfile.SYMTYPE, "symbolic link"),
    (tarfile.LNKTYPE, "hard link"),
    (tarfile.CHRTYPE, "device file"),
    (tarfile.BLKTYPE, "device file"),
    (tarfile.FIFOTYPE, "FIFO"),
])
def test_links_and_devices_in_tar(kind, word, spec):
    data = tar_bytes([("part2/conv2d.py", CONV), tar_info("part1/kernels.py", kind, "/etc/passwd")])
    err = fails("a.tar.gz", data, spec)
    assert "'part1/kernels.py'" in err.reason and word in err.reason


@pytest.mark.parametrize("mode,word", [(stat.S_IFLNK | 0o777, "symbolic link"), (stat.S_IFCHR | 0o600, "device file")])
def test_links_and_devices_in_zip(mode, word, spec):
    link = zipfile.ZipInfo("part1/kernels.py")
    link.external_attr = mode << 16
    data = zip_bytes([("part2/conv2d.py", CONV), (link, "/etc/passwd")])
    err = fails("a.zip", data, spec)
    assert "'part1/kernels.py'" in err.reason and word in err.reason


def test_encrypted_zip_member(spec):
    data = bytearray(zip_bytes([("part2/conv2d.py", CONV)], zipfile.ZIP_STORED))
    data[data.index(b"PK\x03\x04") + 6] |= 0x1      # "encrypted" in the local header ...
    data[data.index(b"PK\x01\x02") + 8] |= 0x1      # ... and in the central directory
    err = fails("a.zip", bytes(data), spec)
    assert "part2/conv2d.py in a.zip is encrypted" in err.reason


# ----------------------------------------------------------------------------- corrupt or unexpected archives

@pytest.mark.parametrize("name,data", [
    ("a.tar.gz", b"\x1f\x8b\x08\x00garbage that is not deflate data"),
    ("a.tar.gz", course_archive()[:200]),                   # truncated gzip stream
    ("a.tar", b"this is not a tar file at all" * 40),
    ("a.tar", course_archive("w")[:1000]),                  # truncated tar data
    ("a.zip", b"PK\x03\x04 not really a zip"),
    ("a.zip", zip_bytes([("part2/conv2d.py", CONV)])[:-30]),  # truncated central directory
    ("a.tgz", b"BZh91AY&SYgarbage"),
])
def test_corrupt_archive(name, data, spec):
    err = fails(name, data, spec, corrupt=True)
    assert err.reason.startswith(f"The archive {name} is corrupt or not a tar/zip archive (")


def test_zip_member_with_bad_crc(spec):
    data = bytearray(zip_bytes([("part2/conv2d.py", CONV)], zipfile.ZIP_STORED))
    at = data.index(b"Optimized reference")
    data[at] = ord("o")
    err = fails("a.zip", bytes(data), spec, corrupt=True)
    assert "part2/conv2d.py cannot be read" in err.reason


def test_archive_without_expected_files(spec):
    data = tar_bytes([("README.md", b"# hi\n"), ("src/solution.py", CONV), ("writeup.pdf", b"%PDF")])
    err = fails("a.tar.gz", data, spec)
    assert "contains none of the expected files (part2/conv2d.py and part1/kernels.py)" in err.reason
    assert "src/solution.py" in err.reason


def test_archive_missing_the_required_file(conv_required_spec):
    err = fails("a.zip", zip_bytes([("part1/kernels.py", KERNELS)]), conv_required_spec)
    assert "missing the required file part2/conv2d.py" in err.reason


def test_archive_with_part1_only(spec):
    sub = submission_from_bytes("a.zip", zip_bytes([("part1/kernels.py", KERNELS)]), spec)
    assert set(sub.files) == {"kernels"} and sub.near_misses == {}


def test_a_misnamed_file_is_noticed_for_a_did_you_mean(spec, conv_required_spec):
    data = tar_bytes([("part1/kernels.py", KERNELS), ("part2/my_conv2d.py", CONV), ("part2/helpers.py", b"x = 1\n")])
    sub = submission_from_bytes("asst4.tar.gz", data, spec)
    assert set(sub.files) == {"kernels"} and sub.near_misses == {"conv2d": "part2/my_conv2d.py"}
    err = fails("asst4.tar.gz", data, conv_required_spec)            # where the file is required: said at once
    assert "missing the required file part2/conv2d.py; did you mean part2/my_conv2d.py?" in err.reason


def test_two_candidates_in_different_folders(spec):
    data = tar_bytes([("a/part2/conv2d.py", CONV), ("b/part2/conv2d.py", CONV)])
    err = fails("a.tar.gz", data, spec)
    assert "more than one candidate conv2d.py" in err.reason
    assert "a/part2/conv2d.py" in err.reason and "b/part2/conv2d.py" in err.reason


def test_same_member_twice(spec):
    data = tar_bytes([("part2/conv2d.py", CONV), ("part2/conv2d.py", CONV)])
    err = fails("a.tar.gz", data, spec)
    assert "more than one candidate conv2d.py" in err.reason


def test_undecodable_and_control_characters_in_names_are_escaped(spec):
    raw = tarfile.TarInfo("x")
    raw.size = len(CONV)
    header = bytearray(raw.tobuf(tarfile.GNU_FORMAT))
    header[0:20] = b"caf\xe9\n/conv2d.py".ljust(20, b"\0")   # a Latin-1 folder name with a newline
    header[148:156] = b"        "
    header[148:155] = b"%06o\0" % sum(header)                 # re-do the header checksum
    data = bytes(header) + CONV + b"\0" * (-len(CONV) % 512) + b"\0" * 1024
    sub = submission_from_bytes("asst4.tar", data, spec)
    assert sub.filenames["conv2d"] == "caf\\udce9\\n/conv2d.py"
    sub.filenames["conv2d"].encode("utf-8")                    # safe to store and to show


def test_a_missing_required_file_is_reported_before_problems_in_optional_ones(conv_required_spec):
    err = fails("a.tar.gz", tar_bytes([("part1/kernels.py", b"def matrix_transpose(:\n")]), conv_required_spec)
    assert "missing the required file part2/conv2d.py" in err.reason

"""Gradescope's container may refuse namespaces (Docker's default seccomp profile does): the
autograder then confines each student process with a uid of its own, rlimits and a
system-call filter, says so in results.json, and refuses to grade (an autograder error, not a
zero) when a student's process could still reach the secret seed or the results file.
no_namespaces.py stands in for the container: under it unshare, mount and clone with a
namespace flag fail as they do under Docker's profile."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import gradescope_helpers
from gradescope_helpers import NO_NAMESPACES, OPTIMIZED, REPO, SMALL_SPEC, GradescopeRoot, asst4_tar, build
from grader.gradescope import results as gs_results

DOCKER_LIKE = Path(__file__).with_name("docker_like.py")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    zips = tmp_path_factory.mktemp("zips")
    place = GradescopeRoot()
    spec = zips / "small-no-precheck.toml"
    # the static check off: the sandbox must hold on its own against code the check would miss
    spec.write_text(SMALL_SPEC.read_text().replace("precheck = true", "precheck = false"))
    build(zips / "autograder.zip", "--assignment", str(spec), "--mode", "local", "--fixed-seed")
    place.unpack(zips / "autograder.zip")
    place.setup()
    place.zips = zips
    yield place
    place.remove()


def hostile(root, marker: str) -> bytes:
    """The optimized kernel, after module-level code that goes for the autograder's secrets."""
    config = root.path / "source" / "nki_gradescope.json"
    results = root.path / "results" / "results.json"
    metadata = root.path / "submission_metadata.json"     # earlier runs' hidden results live in it
    prelude = f'''
import os as _os
def _try(what, action):
    try:
        print("{marker}", what, "OK", repr(action())[:300])
    except Exception as err:
        print("{marker}", what, "DENIED", type(err).__name__)
_try("read-config", lambda: open({str(config)!r}).read())
_try("write-results", lambda: open({str(results)!r}, "w").write('{{"score": 1000}}'))
_try("read-metadata", lambda: open({str(metadata)!r}).read())
_try("read-upload", lambda: _os.listdir({str(root.path / "submission")!r}))
_try("grader-environ", lambda: open("/proc/%d/environ" % _os.getppid(), "rb").read())
import socket as _socket
_try("inet-socket", lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM))
'''
    return prelude.encode() + OPTIMIZED


def test_without_namespaces_the_grade_is_the_same(root):
    with_ns, _ = root.run({"asst4.tar.gz": asst4_tar()})
    without, stdout = root.run({"asst4.tar.gz": asst4_tar()}, no_namespaces=True)
    assert gs_results.problems(without) == []
    assert with_ns["extra_data"]["isolation"]["level"] == "namespaces"
    iso = without["extra_data"]["isolation"]
    assert iso["level"] == "unprivileged-user+seccomp" and iso["network_blocked"] and not iso["refused"]
    assert iso["probe"]["uid"] != 0 and iso["probe"]["secrets_readable"] == [] and not iso["probe"]["inet_socket"]
    for probe in (iso["probe"], with_ns["extra_data"]["isolation"]["probe"]):     # checked at either level
        assert probe["private_reachable"] == [] and not probe["outlived_job"] and probe["files_left"] == []
        assert {"no process outlives its job", "no file left in /tmp or /dev/shm"} <= set(probe["checked"])
    assert len(iso["probe"]["left_behind"]) == 2                    # it made files in /tmp and /dev/shm
    assert without["score"] == with_ns["score"] == 18.5
    assert [t["score"] for t in without["tests"]] == [t["score"] for t in with_ns["tests"]]
    assert "unprivileged user of its own" in without["output"] and "system-call filter" in without["output"]
    assert "isolation: unprivileged-user+seccomp" in stdout


def test_a_kernel_cannot_reach_the_seed_or_the_results_without_namespaces(root):
    results, _ = root.run({"conv2d.py": hostile(root, "ATTACK")}, no_namespaces=True)
    assert gs_results.problems(results) == []
    output = "\n".join(t["output"] for t in results["tests"])
    for attempt in ("read-config", "write-results", "read-metadata", "read-upload", "grader-environ", "inet-socket"):
        assert f"ATTACK {attempt} DENIED" in output, output[-3000:]
    assert "ATTACK read-config OK" not in output
    assert results["score"] == 7.5                                   # its honest score, not the forged 1000
    seed = json.loads((root.path / "source" / "nki_gradescope.json").read_text())["seed"]
    assert str(seed) not in json.dumps(results)


def test_the_hole_the_fallback_closes(root, tmp_path):
    """Control: the same kernel under plain `grader grade` in the same container (no fallback)
    runs as root and reads a root-only file: what a Gradescope autograder would leak."""
    secret_dir = tmp_path / "private"
    secret_dir.mkdir(mode=0o700)
    secret = secret_dir / "nki_gradescope.json"
    secret.write_text('{"seed": 8675309}')
    os.chmod(secret, 0o600)
    source = hostile(root, "ATTACK").replace(str(root.path / "source" / "nki_gradescope.json").encode(),
                                             str(secret).encode())
    kernel = tmp_path / "conv2d.py"
    kernel.write_bytes(source)
    done = subprocess.run([sys.executable, str(NO_NAMESPACES), sys.executable, "-m", "grader.cli", "grade",
                           str(kernel), "--assignment", str(root.zips / "small-no-precheck.toml"), "--seed", "1",
                           "--backend", "sim", "--json", str(tmp_path / "report.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    output = "\n".join(t["output"] for t in json.loads((tmp_path / "report.json").read_text())["tests"])
    assert "ATTACK read-config OK" in output and "8675309" in output


def forking(marker: str) -> bytes:
    """The optimized kernel, after module-level code (run at trace time, in every tracing
    process) that forks, calls setsid() and forks again: the grandchild, named `marker`, out of
    the job's process group and session and without a parent-death signal, keeps writing files
    in /tmp and /dev/shm and holds a SysV shared memory segment."""
    prelude = f'''
import ctypes as _ctypes, os as _os, time as _time
def _survivor():
    _ready_r, _ready_w = _os.pipe()
    if _os.fork() == 0:
        _os.setsid()
        if _os.fork() == 0:
            _libc = _ctypes.CDLL(None)
            _libc.prctl(15, {marker.encode()!r}, 0, 0, 0)
            _libc.shmget(0, 4096, 0o1600)
            _null = _os.open("/dev/null", _os.O_RDWR)
            for _fd in (0, 1, 2):
                _os.dup2(_null, _fd)
            _end = _time.monotonic() + 300
            while True:
                for _where in ("/tmp", "/dev/shm"):
                    try:
                        with open(f"{{_where}}/{marker}-{{_os.getpid()}}", "w") as _fh:
                            _fh.write(str(_time.time()))
                    except OSError:
                        pass
                if _ready_w is not None:
                    _os.write(_ready_w, b"%d" % _os.getpid())
                    _os.closerange(3, 1024)
                    _ready_w = None
                if _time.monotonic() > _end:
                    _os._exit(0)
                _time.sleep(0.05)
        _os._exit(0)
    _os.close(_ready_w)
    print("{marker} forked", _os.read(_ready_r, 32).decode(), flush=True)
_survivor()
'''
    return prelude.encode() + OPTIMIZED


def processes_named(marker: str) -> list[int]:
    """Live processes whose name is `marker` (what forking() calls its grandchildren)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == marker:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry))
        except (OSError, IndexError):
            pass
    return found


def files_named(marker: str) -> list[str]:
    return sorted(str(p) for where in ("/tmp", "/dev/shm") for p in Path(where).glob(f"{marker}*"))


def segments_made_by(pids: list[int]) -> list[str]:
    """SysV shared memory segments that these processes created (/proc/sysvipc/shm's cpid)."""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()
    cpid = lines[0].split().index("cpid")
    return [line for line in lines[1:] if int(line.split()[cpid]) in pids]


@pytest.mark.parametrize("no_namespaces", [False, True], ids=["namespaces", "fallback"])
def test_nothing_a_kernel_forks_outlives_the_grade(root, no_namespaces, monkeypatch):
    """A kernel that forks, calls setsid() and forks again: at either level its grandchildren are
    gone, with their files in /tmp and /dev/shm, when run_autograder exits, and the grade is its
    honest one. (Without namespaces the grandchild is reachable only by its uid: every process
    of the job's uid is killed before the grade is written.) The fallback is Docker's: no
    namespaces and no cgroup file system to write (docker_like.py)."""
    monkeypatch.setattr(gradescope_helpers, "NO_NAMESPACES", DOCKER_LIKE)
    marker, forked = f"nkisurv{uuid.uuid4().hex[:7]}", []
    try:
        results, stdout = root.run({"conv2d.py": forking(marker)}, no_namespaces=no_namespaces)
        output = "\n".join(t["output"] for t in results["tests"])
        forked = [int(pid) for pid in re.findall(rf"{marker} forked (\d+)", output)]
        assert forked, output[-3000:]                                  # the attack ran
        if no_namespaces:
            assert "isolation: unprivileged-user+seccomp (confinement: parent_death)" in stdout
            assert segments_made_by(forked) == []
        assert processes_named(marker) == []
        assert files_named(marker) == []
    finally:
        for pid in processes_named(marker):
            os.kill(pid, 9)
        for path in files_named(marker):
            os.unlink(path)
        for line in segments_made_by(forked) if no_namespaces else ():
            subprocess.run(["ipcrm", "-m", line.split()[1]], check=True)
    assert gs_results.problems(results) == []
    assert results["score"] == 7.5                                   # its honest score


def test_grading_is_refused_when_the_student_could_write_the_results(root):
    """A grader that is not root and has no namespaces cannot keep a student's process (its
    own uid) away from results.json: an autograder error, with what staff must do."""
    nobody = 65534
    owned = [root.path / "source", *(root.path / "source").rglob("*"), root.path / "run_autograder"]
    for path in owned:
        shutil.chown(path, nobody, nobody)
    shutil.copy(NO_NAMESPACES, root.path / "no_namespaces.py")
    try:
        for name in ("submission", "results"):
            shutil.rmtree(root.path / name, ignore_errors=True)
            (root.path / name).mkdir()
            shutil.chown(root.path / name, nobody, nobody)
        (root.path / "submission" / "conv2d.py").write_bytes(OPTIMIZED)
        python = str(root.path / "nki-venv" / "bin" / "python")
        done = subprocess.run(["setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
                               python, str(root.path / "no_namespaces.py"), str(root.path / "run_autograder")],
                              cwd=root.path, env=root.env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        results = json.loads((root.path / "results" / "results.json").read_text())
    finally:
        for path in [*owned, root.path / "results", root.path / "submission"]:
            shutil.chown(path, 0, 0)
    assert gs_results.problems(results) == []
    assert results["score"] == 0 and results["extra_data"]["autograder_error"] is True
    assert results["output"].startswith(gs_results.ERROR_HEADING)
    for reason in ("could read the autograder's secret files", "could write into the results folder",
                   "could read the grader's memory"):
        assert reason in results["output"], results["output"]
    assert "service mode" in results["output"]                       # what staff can do about it
    assert results["extra_data"]["isolation"]["level"] == "same-user"


def test_the_probe_sees_a_readable_secret(root, tmp_path):
    """Under the fallback, a secret file left world-readable is found by the probe (through the
    real sandbox) and grading is refused."""
    folder = root.path / "probe-case"
    folder.mkdir(mode=0o755, exist_ok=True)
    (folder / "secret").write_text("seed")
    os.chmod(folder / "secret", 0o644)
    (folder / "results").mkdir(mode=0o700, exist_ok=True)
    code = ("from pathlib import Path; from grader.gradescope import isolation; "
            f"iso = isolation.establish([Path({str(folder / 'secret')!r})], Path({str(folder / 'results')!r})); "
            "print(iso.level, '|', iso.refused)")
    python = str(root.path / "nki-venv" / "bin" / "python")
    done = subprocess.run([python, str(NO_NAMESPACES), python, "-I", "-c", code], capture_output=True, text=True,
                          timeout=300, env=root.env())
    assert done.returncode == 0, done.stderr
    level, refused = done.stdout.strip().split(" | ")
    assert level == "unprivileged-user+seccomp"
    assert refused == f"a student's process could read the autograder's secret files: {folder / 'secret'}"

"""grader.sandbox on its own: what a child can see (packages only, its own /proc, a private
/tmp), the memory cgroup, cancelling, killing every child, and children dying with their
grader. Children here are small `python -I -c` programs that confine themselves with
`enter()` (fresh processes), or `grader.child` blocked on a FIFO (children of the fork
server); every wait is on a real condition with a generous deadline."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from grader import sandbox
from grader.sandbox import Capabilities, Limits, capabilities, kill_all_children, minimal_env, run_child

ROOT = Path(__file__).resolve().parents[2]
CAPS = capabilities()
DEADLINE = 60.0

needs_view = pytest.mark.needs("package_view")


def wait_until(condition, deadline_s: float = DEADLINE, what: str = "condition"):
    """Poll `condition` until it returns something truthy; fail at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"{what} did not happen within {deadline_s:g} s")
        time.sleep(0.02)


def confined(code: str) -> list[str]:
    """A fresh child that confines itself, then runs `code`."""
    return [sys.executable, "-I", "-c", "from grader.sandbox import enter\nenter()\n" + textwrap.dedent(code)]


def job_dir(base: Path) -> str:
    job = Path(tempfile.mkdtemp(prefix="sandbox-job-", dir=base))
    job.chmod(0o755)            # as the grader makes them: the child may run as another uid
    return str(job)


def run(code: str, workdir: str, **limits) -> sandbox.ChildResult:
    return run_child(confined(code), workdir, limits=Limits(**dict({"wall_seconds": 30.0}, **limits)),
                     env=minimal_env())


def alive(pid: int) -> bool:
    """Does `pid` still run (a zombie has finished)?"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def first_in_its_pid_namespace(pid: int) -> bool:
    """Is `pid` the first process (PID 1) of a PID namespace below ours?"""
    try:
        with open(f"/proc/{pid}/status") as fh:
            found = [line.split()[1:] for line in fh if line.startswith("NSpid:")]
    except OSError:
        return False
    return bool(found) and len(found[0]) > 1 and found[0][-1] == "1"


def sandboxed_in(workdir: str) -> list[int]:
    """The processes of a child confined in `workdir`, once it runs: [reaper, first process of
    its PID namespace] (the reaper keeps the job directory as its working directory), or
    [first process] alone when the zygote's monitor made the namespace and stands in for the
    reaper."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == workdir:
                below = [p for p in children_of(int(entry)) if alive(p)]
                if below or not CAPS.pid or first_in_its_pid_namespace(int(entry)):
                    return [int(entry)] + below       # without a PID namespace there is no reaper
        except OSError:
            continue
    return []


# ----------------------------------------------------------------------------- what the child sees

@needs_view
def test_the_child_sees_only_its_packages_by_any_path(tmp_path):
    result = run(f"""
        import json, os
        root = {str(ROOT)!r}
        found = {{}}
        for path in [root + "/reference_kernels/conv2d_optimized.py", root + "/tests/grader/test_sandbox.py",
                     root + "/grader/specs/asst4-trainium2.toml", root + "/grader/grade.py", root + "/.git/HEAD",
                     "/proc/self/root" + root + "/reference_kernels/conv2d_optimized.py",
                     "/proc/1/root" + root + "/grader/specs/asst4-trainium2.toml"]:
            try:
                open(path, "rb").read()
                found[path] = "read"
            except OSError as err:
                found[path] = type(err).__name__
        found["repo"] = sorted(os.listdir(root))
        found["grader"] = sorted(os.listdir(root + "/grader"))
        found["site"] = sorted(os.listdir(os.path.dirname(os.path.dirname(json.__file__)) + "/site-packages"))
        import numpy, ml_dtypes, threadpoolctl, grader.wire
        found["imports"] = "ok"
        for name in ("reference_kernels", "grader.grade", "grader.checks", "pytest", "flask", "sqlalchemy"):
            try:
                __import__(name)
                found[name] = "imported"
            except ImportError:
                found[name] = "missing"
        print(json.dumps(found))
    """, job_dir(tmp_path))
    assert result.returncode == 0, result.output
    found = json.loads(result.stdout)
    assert all(v in ("FileNotFoundError", "PermissionError") for k, v in found.items() if k.startswith("/")), found
    assert set(found["repo"]) <= {"grader", "nkisim", ".venv"} and "nkisim" in found["repo"]
    assert found["grader"] == sorted(f for f in sandbox.CHILD_GRADER_FILES if (ROOT / "grader" / f).exists())
    assert found["site"] == []                                  # the interpreter's own site-packages, emptied
    assert found["imports"] == "ok"
    for name in ("reference_kernels", "grader.grade", "grader.checks", "pytest", "flask", "sqlalchemy"):
        assert found[name] == "missing", name


@needs_view
def test_a_private_tmp_even_when_the_code_lives_under_tmp(tmp_path):
    """A copy of the grader package under /tmp (as a checkout or venv in /tmp would be), run by
    the child and added to its view: the view binds it into the child's own empty /tmp, and the
    rest of the host's /tmp stays out of sight."""
    code_root = Path(tempfile.mkdtemp(prefix="sandbox-code-", dir="/tmp"))
    secret = Path(tempfile.mkdtemp(prefix="sandbox-secret-", dir="/tmp")) / "secret.txt"
    try:
        shutil.copytree(ROOT / "grader", code_root / "grader", ignore=shutil.ignore_patterns("__pycache__", "specs"))
        secret.write_text("host tmp")
        argv = [sys.executable, "-I", "-c", textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(code_root)!r})
            from grader.sandbox import enter
            import grader.sandbox
            assert grader.sandbox.__file__.startswith({str(code_root)!r}), grader.sandbox.__file__
            enter()
            import json, os
            found = {{"tmp": sorted(os.listdir("/tmp")), "code": sorted(os.listdir({str(code_root / "grader")!r}))}}
            try:
                open({str(secret)!r}).read()
                found["secret"] = "read"
            except OSError as err:
                found["secret"] = type(err).__name__
            open("/tmp/scratch", "w").write("mine")
            import grader.wire
            print(json.dumps(found))
        """)]
        result = run_child(argv, job_dir(tmp_path), limits=Limits(wall_seconds=30.0), env=minimal_env(),
                           view_extra=(str(code_root / "grader"),))
    finally:
        shutil.rmtree(code_root)
        shutil.rmtree(secret.parent)
    assert result.returncode == 0, result.output
    found = json.loads(result.stdout)
    assert found["secret"] == "FileNotFoundError"
    assert secret.parent.name not in found["tmp"] and code_root.name in found["tmp"]
    assert "wire.py" in found["code"]


@pytest.mark.needs("private_proc")
def test_the_child_has_its_own_proc(tmp_path):
    result = run(f"""
        import json, os
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        try:
            grader = open("/proc/{os.getpid()}/cmdline", "rb").read().decode()
        except OSError as err:
            grader = type(err).__name__
        print(json.dumps({{"pids": pids, "grader": grader, "me": os.getpid()}}))
    """, job_dir(tmp_path))
    found = json.loads(result.stdout)
    assert found == {"pids": [1], "grader": "FileNotFoundError", "me": 1}


# ----------------------------------------------------------------------------- memory

@pytest.mark.needs("memory_cgroup")
def test_the_memory_cgroup_stops_memfd_memory_beyond_its_limit(tmp_path):
    """Memory RLIMIT_AS does not count (memfd files grown with fallocate, each under the file
    size limit): the job's memory cgroup, 256 MiB here, does, and the kernel kills the child."""
    result = run("""
        import os
        held, fds = 0, []
        try:
            while held < 2 ** 30:
                fds.append(os.memfd_create("hoard"))
                os.posix_fallocate(fds[-1], 0, 32 * 2 ** 20)
                held += 32 * 2 ** 20
        except OSError as err:
            print("refused", err)
        print("held", held >> 20)
    """, job_dir(tmp_path), resident_bytes=256 * 2 ** 20)
    assert result.killed_by == "memory limit", (result.killed_by, result.output)
    assert "held 1024" not in result.stdout


@pytest.mark.needs("memory_cgroup")
def test_a_hierarchy_holding_both_controllers_gives_the_job_one_cgroup_with_both_limits():
    """On cgroup v2 the pids and memory controllers live in one hierarchy, so both parents are
    the same directory: the job's cgroup there must get the memory limit too (a second mkdir of
    the same name failed, and the memory limit was silently never written). Here the memory
    hierarchy stands in for that shared parent."""
    parent = CAPS.memory_cgroup
    limits = Limits(resident_bytes=300 * 2 ** 20, processes=17)
    made = sandbox._make_cgroups(Capabilities(pids_cgroup=parent, memory_cgroup=parent), limits)
    try:
        assert len(made) == 1 and os.path.dirname(made[0]) == parent
        written = {}
        for name in ("memory.max", "memory.limit_in_bytes", "pids.max"):
            if os.path.exists(os.path.join(made[0], name)):
                written[name] = Path(made[0], name).read_text().strip()
        assert str(300 * 2 ** 20) in written.values(), written
    finally:
        for path in made:
            sandbox._remove_cgroup(path)


# ----------------------------------------------------------------------------- stopping children

def _spinning(via: str, base: Path) -> tuple[list[str], str]:
    """A child that never ends: a fresh process spinning on the CPU, or a fork-server child
    blocked reading its job description from a FIFO nobody writes."""
    workdir = job_dir(base)
    if via == "fresh":
        return confined(f"# {uuid.uuid4().hex}\nwhile True:\n    pass\n"), workdir
    os.mkfifo(os.path.join(workdir, "job.json"))
    return [sys.executable, "-I", "-m", "grader.child"], workdir


def _in_thread(argv, workdir, **kw):
    box: dict = {}

    def go():
        box["result"] = run_child(argv, workdir, limits=Limits(wall_seconds=300.0), env=minimal_env(), **kw)
    thread = threading.Thread(target=go, daemon=True)   # a hung run must not hold up the exit
    thread.start()
    return thread, box


@pytest.mark.parametrize("via", ["fresh", "zygote"])
def test_the_cancel_event_kills_the_child_at_once(tmp_path, via):
    argv, workdir = _spinning(via, tmp_path)
    cancel = threading.Event()
    thread, box = _in_thread(argv, workdir, cancel=cancel)
    pids = wait_until(lambda: sandboxed_in(workdir), what="the child starting")
    cancel.set()
    thread.join(DEADLINE)
    assert not thread.is_alive()
    result = box["result"]
    assert result.cancelled and result.killed_by == "cancelled" and not result.timed_out
    assert not os.path.exists(workdir)                          # its job directory removed
    wait_until(lambda: not any(alive(p) for p in pids), what="the child's processes exiting")


@pytest.mark.parametrize("via", ["fresh", "zygote"])
def test_a_cancel_that_comes_as_the_child_starts_still_ends_it(tmp_path, via):
    # a grade cancelled while it launches a child kills that child at once, maybe before the
    # child has made its process group: the kill must not miss it and leave the grade waiting
    for attempt in range(20):
        argv, workdir = _spinning(via, tmp_path)
        cancel = threading.Event()
        cancel.set()
        thread, box = _in_thread(argv, workdir, cancel=cancel)
        thread.join(DEADLINE)
        assert not thread.is_alive(), f"attempt {attempt}: the cancelled child still waited for after {DEADLINE:g} s"
        assert box["result"].cancelled and not os.path.exists(workdir)


def test_kill_all_children_stops_every_running_child(tmp_path):
    runs = [_spinning("fresh", tmp_path), _spinning("zygote", tmp_path)]
    started = [_in_thread(argv, workdir) for argv, workdir in runs]
    pids = [wait_until(lambda w=w: sandboxed_in(w), what="a child starting") for _, w in runs]
    assert kill_all_children() == 2
    for thread, box in started:
        thread.join(DEADLINE)
        assert not thread.is_alive() and box["result"].cancelled
    for _, workdir in runs:
        assert not os.path.exists(workdir)
    wait_until(lambda: not any(alive(p) for group in pids for p in group), what="every child exiting")
    assert kill_all_children() == 0


GRADER_STAND_IN = """
import sys, time
from grader.sandbox import Limits, minimal_env, run_child
argv = {argv!r}
run_child(argv, {workdir!r}, limits=Limits(wall_seconds=300.0), env=minimal_env())
"""


@pytest.mark.parametrize("via", ["fresh", "zygote"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_child_never_outlives_its_grader(tmp_path, via, sig):
    """A process runs a never-ending child through run_child, and is killed: the child, its
    PID namespace, the fork server and the job directory all go."""
    argv, workdir = _spinning(via, tmp_path)
    grader = subprocess.Popen([sys.executable, "-c", GRADER_STAND_IN.format(argv=argv, workdir=workdir)],
                              start_new_session=True)
    try:
        pids = wait_until(lambda: sandboxed_in(workdir), what="the child starting")
        servers = [p for p in children_of(grader.pid) if alive(p)]      # the fork server, if any
        grader.send_signal(sig)
        grader.wait(DEADLINE)
        wait_until(lambda: not any(alive(p) for p in pids + servers), what="the sandbox exiting")
        wait_until(lambda: not os.path.exists(workdir), what="the job directory's removal")
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait()


# ----------------------------------------------------------------------------- reporting

def test_capabilities_describe_names_exactly_the_protections_present():
    """What the Gradescope isolation report prints: each protection the machine has, by name,
    and none it lacks (pid against pids_cgroup: whole names, not substrings)."""
    assert Capabilities().describe() == "confinement: none (rlimits and timeouts only)"
    some = Capabilities(net=True, pids_cgroup="/sys/fs/cgroup/pids", parent_death=True)
    assert some.describe() == "confinement: net, pids_cgroup, parent_death"
    named = capabilities().describe().removeprefix("confinement: ").split(", ")
    assert named == [n for n in Capabilities.FLAGS if getattr(capabilities(), n)]


@pytest.mark.needs("package_view")
def test_the_package_view_comes_with_every_protection_it_is_built_on():
    """The package-only view is built in a PID and mount namespace with a read-only root and a
    private /tmp and /proc: detecting it without them would be a detection bug."""
    caps = capabilities()
    assert (caps.mount, caps.readonly, caps.pid, caps.private_tmp, caps.private_proc) == (True,) * 5


@needs_view
def test_view_extra_adds_a_file_to_what_the_child_may_read(tmp_path):
    """A trusted process run through the sandbox (the executor, say) may need one more grader
    module: it is bound in read-only, and its neighbours stay out of sight."""
    extra = ROOT / "grader" / "report.py"
    argv = confined(f"""
        import os
        print(sorted(os.listdir({str(extra.parent)!r})))
        print(len(open({str(extra)!r}).read()) > 0)
    """)
    result = run_child(argv, job_dir(tmp_path), limits=Limits(wall_seconds=30.0), env=minimal_env(),
                       view_extra=(str(extra),))
    assert result.returncode == 0, result.output
    listed, readable = result.stdout.splitlines()
    assert "report.py" in listed and "grade.py" not in listed and readable == "True"


@pytest.mark.needs("package_view")
def test_code_living_under_tmp_is_bound_back_into_a_private_tmp():
    """A checkout or venv under /tmp used to leave the child with no private /tmp (it would hide
    the code), so nothing was writable and the Neuron compile failed with "No usable temporary
    directory". Now the code is bound back, read-only, into a private, writable /tmp."""
    code = Path(tempfile.mkdtemp(dir="/tmp", prefix="nki-code-under-tmp-"))
    other = Path(tempfile.mkdtemp(dir="/tmp", prefix="nki-other-under-tmp-"))
    try:
        (code / "module.py").write_text("VALUE = 7\n")
        (other / "secret.txt").write_text("not for the child\n")
        probe = textwrap.dedent(f"""
            import ctypes, os, tempfile
            from grader import sandbox
            sandbox._tmp_code_dirs = lambda: ({str(code)!r},)
            assert sandbox._libc.unshare(sandbox.CLONE_NEWNS) == 0
            assert sandbox._libc.mount(None, b"/", None, sandbox.MS_REC | sandbox.MS_PRIVATE, None) == 0
            assert sandbox._lock_down("size=4m,mode=1777")
            assert open({str(code / "module.py")!r}).read() == "VALUE = 7\\n"
            try:
                open({str(code / "new.py")!r}, "w")
                raise SystemExit("the bound code is writable")
            except OSError:
                pass
            assert not os.path.exists({str(other / "secret.txt")!r}), "the rest of /tmp shows"
            with tempfile.NamedTemporaryFile() as fh:          # a usable temporary directory
                assert fh.name.startswith("/tmp/")
            print("ok")
        """)
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                              cwd=str(Path(__file__).resolve().parents[2]))
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    finally:
        shutil.rmtree(code, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)

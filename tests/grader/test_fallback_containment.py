"""The sandbox without namespaces or cgroups (the Gradescope fallback, as Docker's default
profile leaves it: docker_like.py): a child's processes are found by its uid alone, a uid no
other job on the machine holds, and every one of them is killed, with the files, links and
SysV segments they made, before run_child returns, however the job ends. Each case runs a real
grader process under docker_like.py; the child forks, calls setsid() and forks again."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from grader import sandbox

HERE = Path(__file__).resolve().parent
DOCKER_LIKE = HERE / "docker_like.py"
REPO = HERE.parents[1]
DEADLINE = 120

# the grader's side: run one child at the fallback level, end it as `mode` says, and report
# what of it was alive the moment run_child returned
DRIVER = r'''
import json, os, sys, threading, time
from pathlib import Path
from grader import sandbox
from grader.sandbox import Limits, kill_all_children, minimal_env, run_child

args = json.loads(sys.argv[1])
marker = args["marker"]


def named():
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == marker:
                if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry))
        except OSError:
            pass
    return found


sandbox.FALLBACK["uid"] = True          # as grader.gradescope.isolation turns it on
caps = sandbox.capabilities()
argv = [sys.executable, "-I", "-c", "from grader.sandbox import enter\nenter()\n" + args["code"]]
cancel = threading.Event()
box = {}


def go():
    try:
        box["result"] = run_child(argv, args["workdir"], limits=Limits(wall_seconds=120.0), env=minimal_env(),
                                  cancel=cancel)
    except Exception as err:
        box["error"] = f"{type(err).__name__}: {err}"
    box["at_return"] = named()


thread = threading.Thread(target=go)
thread.start()
report = {"confinement": caps.describe()}
if args["mode"] != "exit":
    ready = Path(args["ready"])
    end = time.monotonic() + 60
    while not (ready.exists() and ready.read_text()) and time.monotonic() < end:
        time.sleep(0.02)
    report["ready"] = int(ready.read_text()) if ready.exists() else 0      # the grandchild's pid
    if args["mode"] == "cancel":
        cancel.set()
    else:
        report["killed"] = kill_all_children()
        report["after_kill_all"] = named()
thread.join()
result = box.get("result")
report.update(error=box.get("error", ""), at_return=box["at_return"], stdout=result.stdout if result else "",
              stderr=result.stderr if result else "", cancelled=bool(result and result.cancelled))
print(json.dumps(report))
'''

# the child: a grandchild in a session of its own, named `marker`, that makes a file in /tmp
# and /dev/shm, a directory, links to the grader's files, a SysV segment, and sleeps on
FORKING = r'''
import ctypes, os, time
MARK, PRECIOUS, READY = {marker!r}, {precious!r}, {ready!r}


def grandchild(ready_w):
    libc = ctypes.CDLL(None)
    libc.prctl(15, MARK.encode(), 0, 0, 0)
    libc.shmget(0, 4096, 0o1600)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.mkdir(f"/tmp/{{MARK}}-dir")
    with open(f"/tmp/{{MARK}}-dir/inside", "w") as fh:
        fh.write("x")
    os.symlink(PRECIOUS, f"/tmp/{{MARK}}-link")                    # a link to a root file: the link goes
    os.symlink(os.path.dirname(PRECIOUS), f"/tmp/{{MARK}}-dir/into")   # and is never followed
    for where in ("/tmp", "/dev/shm"):
        with open(f"{{where}}/{{MARK}}-{{os.getpid()}}", "w") as fh:
            fh.write("x")
    with open(READY, "w") as fh:
        fh.write(str(os.getpid()))
    os.write(ready_w, b"%d" % os.getpid())
    os.closerange(3, 1024)
    end = time.monotonic() + 300
    while time.monotonic() < end:
        time.sleep(0.05)
    os._exit(0)


ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        grandchild(ready_w)
    os._exit(0)
os.close(ready_w)
print("forked", os.read(ready_r, 32).decode(), flush=True)
{then}
'''

# every process forks for ever, each in a session of its own, up to the job's process limit
FORK_BOMB = r'''
import ctypes, os, time
if os.fork() == 0:
    ctypes.CDLL(None).prctl(15, {marker!r}.encode(), 0, 0, 0)
    while True:
        try:
            if os.fork() == 0:
                os.setsid()
        except OSError:
            pass
time.sleep(0.5)
print("bombed", os.getuid(), flush=True)
'''


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            status = Path(f"/proc/{entry}/status").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and int(line.split()[1]) == uid and "\nState:\tZ" not in status:
                found.append(int(entry))
    return found


def named(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == marker:
                if Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry))
        except OSError:
            pass
    return found


def left_behind(marker: str) -> list[str]:
    return sorted(str(p) for where in ("/tmp", "/dev/shm") for p in Path(where).glob(f"{marker}*"))


def segments_made_by(pids: list[int]) -> list[str]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()
    cpid = lines[0].split().index("cpid")
    return [line for line in lines[1:] if int(line.split()[cpid]) in pids]


def at_fallback(code: str, mode: str, tmp_path: Path, marker: str) -> dict:
    """Run DRIVER under docker_like.py on a child running `code`; its report."""
    workdir = tmp_path / "job"
    workdir.mkdir(mode=0o755)
    args = {"marker": marker, "code": code, "mode": mode, "workdir": str(workdir),
            "ready": f"/tmp/{marker}-ready"}
    done = subprocess.run([sys.executable, str(DOCKER_LIKE), sys.executable, "-c", DRIVER, json.dumps(args)],
                          cwd=REPO, capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def marker():
    """A name for the attack's processes and files; whatever a failing case left is removed."""
    name = f"nkisurv{uuid.uuid4().hex[:7]}"
    yield name
    for pid in named(name):
        os.kill(pid, signal.SIGKILL)
    for path in left_behind(name):
        path = Path(path)
        if path.is_dir() and not path.is_symlink():
            subprocess.run(["rm", "-rf", "--", str(path)], check=True)
        else:
            path.unlink()


@pytest.mark.parametrize("mode", ["exit", "cancel", "kill_all_children"])
def test_a_forked_setsid_grandchild_ends_with_its_job(tmp_path, marker, mode):
    precious = tmp_path / "precious" / "grader-file"
    precious.parent.mkdir()
    precious.write_text("the grader's")
    code = FORKING.format(marker=marker, precious=str(precious), ready=f"/tmp/{marker}-ready",
                          then="" if mode == "exit" else "while True:\n    time.sleep(1)")
    report = at_fallback(code, mode, tmp_path, marker)
    assert report["confinement"] == "confinement: parent_death"     # no PID namespace, no cgroup
    assert report["error"] == "", report
    if mode == "exit":
        forked = [int(report["stdout"].split()[1])]
    else:
        assert report["ready"] and report["cancelled"]
        forked = [report["ready"]]
        assert report.get("after_kill_all", []) == []               # kill_all_children ends them itself
    assert report["at_return"] == [], report                         # gone before run_child returned
    assert named(marker) == [] and left_behind(marker) == []
    assert segments_made_by(forked) == []
    assert precious.read_text() == "the grader's"                  # links were removed, never followed
    if mode == "exit":
        assert report["stdout"].startswith("forked ")


def test_a_fork_bomb_of_setsid_processes_is_ended(tmp_path, marker):
    report = at_fallback(FORK_BOMB.format(marker=marker), "exit", tmp_path, marker)
    assert report["error"] == "" and report["stdout"].startswith("bombed "), report
    assert report["at_return"] == []
    uid = int(report["stdout"].split()[1])
    assert uid in sandbox.CHILD_UIDS and processes_of(uid) == []


CLAIMER = r'''
import json, os, subprocess, sys
from grader import sandbox
first, count, hold = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sandbox.CLAIMABLE_UIDS = range(first, first + int(sys.argv[4]))
claims = [sandbox._claim_uid() for _ in range(count)]
if hold == "process":           # a process of the first uid, in a session of its own, then this holder dies
    subprocess.Popen(["sleep", "300"], user=claims[0].uid, group=claims[0].uid, extra_groups=[],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
print(json.dumps([c.uid for c in claims]), flush=True)
sys.stdin.read()
for claim in claims:
    sandbox._release_uid(claim)
'''


def claimer(first: int, count: int, span: int, hold: str = "") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CLAIMER, str(first), str(count), hold or "-", str(span)],
                            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


# uids outside CHILD_UIDS: no real job claims them while these tests run
TEST_UIDS = 170_000 + (os.getpid() % 1000) * 100


def test_no_two_processes_hold_the_same_uid():
    holders = [claimer(TEST_UIDS, 15, 30) for _ in range(2)]
    try:
        held = [set(json.loads(h.stdout.readline())) for h in holders]
        assert len(held[0]) == len(held[1]) == 15 and not held[0] & held[1]
        third = subprocess.run([sys.executable, "-c", CLAIMER, str(TEST_UIDS), "1", "-", "30"], cwd=REPO,
                               input="", capture_output=True, text=True, timeout=DEADLINE)
        assert "every uid from" in third.stderr and "is held by another job" in third.stderr
    finally:
        for h in holders:
            h.communicate("", timeout=DEADLINE)
    assert not any(Path("/run/nkigrader-uids", str(uid)).exists() for uid in held[0] | held[1])     # released


def test_a_uid_whose_holder_died_is_ended_before_it_is_claimed_again():
    uid = TEST_UIDS + 50
    dead = claimer(uid, 1, 1, hold="process")
    assert json.loads(dead.stdout.readline()) == [uid]
    left = processes_of(uid)
    assert left, "the holder's process did not start"
    dead.kill()
    dead.communicate(timeout=DEADLINE)
    again = claimer(uid, 1, 1)
    try:
        assert json.loads(again.stdout.readline()) == [uid]
        assert processes_of(uid) == []                  # ended before the uid was handed out again
    finally:
        again.communicate("", timeout=DEADLINE)
        for pid in processes_of(uid):
            os.kill(pid, signal.SIGKILL)

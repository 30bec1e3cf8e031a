"""How well a Gradescope container can hold a student's code, decided at run time.

Gradescope runs the autograder as root in a Docker container that may refuse the namespaces
our sandbox uses (Docker's default seccomp profile blocks unshare and mount). The levels,
strongest first:

- "namespaces": the sandbox as on our own workers (own uid, empty network namespace, PID
  namespace with its own /proc, a file system holding only the packages the child imports);
- "unprivileged-user+seccomp": no namespaces, so each child still gets a uid of its own (no
  access to root-only files, to the grader's memory or to its signals), rlimits, and a
  system-call filter: no network sockets, no ptrace, no namespaces or mounts;
- "unprivileged-user": the same without the filter (libseccomp missing): the network is
  reachable, which the report says;
- "same-user": the grader is not root and has no namespaces: the child would run as the
  grader's own user.

Whatever the level, a probe process started through the real sandbox then tries what a
student's code could: read the secret files and the autograder's private entries, write into the
results folder, read the grader's memory, leave a process running (forked, in a session of its
own) and files in /tmp and /dev/shm after its job. If any works, grading is refused (an
autograder error, never a zero): a grade such a process could write or a seed it could read is
worth nothing, and one that outlives its job could still be at work when the grade is written.
Without namespaces the sandbox finds such a process by the job's uid, a uid no other job on the
machine holds (grader.sandbox), and ends it before run_child returns."""
from __future__ import annotations

import json
import os
import secrets as random_names
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import sandbox

FILTER_MODULE = "grader.gradescope.syscall_filter"
PROBE_MODULE = "grader.gradescope.probe"
LEVEL_TEXT = {
    "namespaces": "namespaces (a uid of its own, no network, its own PID namespace and /proc, a file system "
                  "holding only the packages it imports)",
    "unprivileged-user+seccomp": "an unprivileged user of its own, resource limits and a system-call filter "
                                 "(no network sockets, no ptrace, no namespaces or mounts)",
    "unprivileged-user": "an unprivileged user of its own and resource limits; no system-call filter, so the "
                         "network was reachable",
    "same-user": "the grader's own user (no namespaces and no root to drop privileges from)",
}


@dataclass
class Isolation:
    level: str
    network_blocked: bool
    refused: str = ""                   # why grading must not go on ("" when it may)
    probe: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    confinement: str = ""               # sandbox.capabilities().describe()

    @property
    def sentence(self) -> str:
        return f"Your code ran confined by {LEVEL_TEXT.get(self.level, self.level)}."

    def to_json(self) -> dict:
        return asdict(self)


def _filter_available() -> str:
    """'' when the system-call filter can be built here, else why not."""
    try:
        from . import syscall_filter
        syscall_filter.build()
    except Exception as err:      # noqa: BLE001 - pyseccomp raises RuntimeError without libseccomp
        return f"{type(err).__name__}: {err}"
    return ""


def establish(secrets: list[Path], results_dir: Path, job_root: str | None = None,
              private: list[Path] = ()) -> Isolation:
    """Choose the strongest confinement that works here, turn it on for every child of this
    process, and probe it. `secrets` are files a student's process must not read, `private`
    entries (files or folders) it must neither read nor enter."""
    caps = sandbox.capabilities()
    notes = []
    if caps.package_view and caps.unprivileged:
        level, blocked = "namespaces", caps.net
    elif os.geteuid() == 0:
        sandbox.FALLBACK["uid"] = True
        why_not = _filter_available()
        if why_not:
            level, blocked = "unprivileged-user", caps.net
            notes.append(f"no system-call filter: {why_not}")
        else:
            sandbox.FALLBACK["filter"] = FILTER_MODULE
            level, blocked = "unprivileged-user+seccomp", True
    else:
        level, blocked = "same-user", caps.net
    found = probe(secrets, results_dir, job_root, private)
    if found.get("status") != "ok" and sandbox.FALLBACK["filter"]:
        # the filter failed in the child (its library unreadable there, say): without it, still confined
        notes.append(f"the system-call filter did not load in the child: {found.get('error', '')[:300]}")
        sandbox.FALLBACK["filter"] = ""
        level, blocked = "unprivileged-user", caps.net
        found = probe(secrets, results_dir, job_root, private)
    iso = Isolation(level, blocked, probe=found, notes=notes, confinement=caps.describe())
    if found.get("status") != "ok":
        iso.refused = ("the sandbox could not start a confined process here: "
                       f"{found.get('error') or 'no answer from it'}")
    else:
        reasons = []
        if found["secrets_readable"]:
            reasons.append("a student's process could read the autograder's secret files: "
                           + ", ".join(found["secrets_readable"]))
        if found["results_writable"]:
            reasons.append("a student's process could write into the results folder")
        if found["grader_memory"]:
            reasons.append("a student's process could read the grader's memory")
        if found.get("private_reachable"):
            reasons.append("a student's process could read what it has no need of in the autograder's folder: "
                           + ", ".join(found["private_reachable"]))
        if found.get("outlived_job"):
            reasons.append("a process a student's code started (forked, in a session of its own) outlived its job")
        if found.get("files_left"):
            reasons.append("files a student's process made outlived its job: " + ", ".join(found["files_left"]))
        if sandbox.FALLBACK["filter"] and found.get("inet_socket"):
            reasons.append("the system-call filter did not stop a network socket")
        iso.refused = "; ".join(reasons)
    if not found.get("inet_socket", True):
        iso.network_blocked = True
    return iso


def probe(secrets: list[Path], results_dir: Path, job_root: str | None = None, private: list[Path] = ()) -> dict:
    """Run the probe through the real sandbox and return what it could reach, and whether
    what it left behind (a process, files) was gone when its job was over."""
    workdir = tempfile.mkdtemp(prefix="nki-probe-", dir=job_root)
    job = os.path.join(workdir, "job")
    os.makedirs(job)
    survivor = f"nkiprobe{random_names.token_hex(3)}"        # a process name: 15 characters at most
    try:
        with open(os.path.join(job, "job.json"), "w") as fh:
            json.dump({"secrets": [str(p) for p in secrets], "results_dir": str(results_dir),
                       "grader_pid": os.getpid(), "private": [str(p) for p in private], "survivor": survivor}, fh)
        here = os.path.dirname(os.path.abspath(__file__))
        child = sandbox.run_child([sys.executable, "-I", "-m", PROBE_MODULE], job,
                                  limits=sandbox.Limits(wall_seconds=120.0), env=sandbox.minimal_env(),
                                  view_extra=(os.path.join(here, "__init__.py"), os.path.join(here, "probe.py")))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    line = bytes(child.result).split(b"\n", 1)[0]
    try:
        found = json.loads(line) if line else {}
    except ValueError:
        found = {}
    outlived = _processes_named(survivor)
    for pid in outlived:            # the probe never leaves anything, whatever the sandbox did
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if not isinstance(found, dict) or not found:
        why = child.killed_by or f"exit code {child.returncode}"
        return {"status": "error", "error": f"the probe process died ({why}): {child.output[-1000:]}"}
    left = [path for path in found.get("left_behind", []) if os.path.lexists(path)]
    for path in left:
        shutil.rmtree(path, ignore_errors=True)
    found.update(outlived_job=bool(outlived), files_left=left,
                 checked=["secrets unreadable", "private entries unreadable", "results folder unwritable",
                          "grader's memory unreadable", "no process outlives its job",
                          "no file left in /tmp or /dev/shm"])
    return found


def _processes_named(name: str) -> list[int]:
    """Live processes called `name` (by /proc/PID/comm)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as fh:
                if fh.read().strip() != name:
                    continue
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found

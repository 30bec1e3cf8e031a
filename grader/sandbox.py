"""Running untrusted kernel code in a child process.

Always enforced: a fresh private working directory; a minimal environment; resource limits
(address space, CPU seconds, file size, open files, no core dumps); a wall-clock timeout and a
cancel event that kill the whole process group; a parent-death signal, so no child outlives
its grader; stdout/stderr captured and truncated; results only over an inherited pipe.

Enforced where the kernel allows it (Linux, as root or with unprivileged user namespaces),
detected once per process and listed by `capabilities()`:
- `net`: a new, empty network namespace (no interfaces but a down loopback);
- `pid`: a new PID namespace (the child forks once; the grandchild, PID 1 there, runs the
  kernel), so the child sees neither the grader nor other jobs and cannot signal them;
- `private_proc`: that namespace's own /proc, so the child cannot list host processes or read
  another process's command line;
- `mount`: a private mount namespace; with `package_view` (a root grader, sim backend) the
  child's root is a new tmpfs holding bind mounts of just the interpreter and its standard
  library, the system libraries, the packages the child imports (`view_plan`), its job
  directory, device nodes, its own /proc and a private /tmp; the repository, reference
  kernels, tests, other site-packages and the rest of the machine do not exist there.
  Otherwise the job root and configured paths are covered by empty tmpfs mounts;
- `readonly`: every mount read-only but the private /tmp, then a new user namespace or
- `unprivileged`: an unused uid with no groups and no_new_privs, the job's alone on the machine
  (claimed with a lock file per uid, _claim_uid); where no PID namespace holds the job (the
  Gradescope fallback, FALLBACK), every process of that uid is killed, and its files in the
  world-writable directories and its SysV IPC objects removed, before run_child returns;
- `pids_cgroup` / `memory_cgroup`: a cgroup per job capping the process count (fork bombs,
  as RLIMIT_NPROC does not bind root) and the memory it holds, shared memory included
  (memfd, tmpfs), with no swap.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import functools
import itertools
import json
import os
import platform
import pwd
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .errors import GraderFault
from .zygote import ZYGOTE, set_parent_death_signal, writer_gone

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
# namespaces that hold state a job could leave behind or share with the next (SysV segments and
# POSIX message queues; the host name): the child gets fresh ones, which the kernel destroys
# with everything in them when the job's last process exits
CLONE_NEWUTS, CLONE_NEWIPC = 0x04000000, 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
CHILD_UIDS = range(100_000, 160_000)     # one unused uid per child, claimed for it alone
# the uids a job may claim (the first is the capability probe's, which claims none); a lock file
# per uid, in a directory only root may write, says which are taken by a job on this machine
CLAIMABLE_UIDS = range(CHILD_UIDS.start + 1, CHILD_UIDS.stop)
UID_LOCK_DIRS = ("/run", tempfile.gettempdir())
# where any uid may make files (world-writable), so where a job without namespaces leaves them
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
SCRATCH_DEPTH = 8                        # world-writable directories below those, looked into
END_UID_SECONDS = 10.0                   # for a job's processes to die of SIGKILL
IPC_RMID = 0
SYS_MOUNT_SETATTR = 442                  # the same number on every architecture (Linux 5.12+)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 1, 2

# What a simulator child imports, and so all it may see of the Python world (nkisim's own
# dependencies included: a package missing here is an ImportError in every child).
CHILD_PACKAGES = ("numpy", "ml_dtypes", "threadpoolctl", "executing", "sortedcontainers", "nkisim")
CHILD_GRADER_FILES = ("__init__.py", "child.py", "executor.py", "jobs.py", "sandbox.py", "zygote.py", "wire.py")
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache", "/etc/localtime")
DEVICES = ("null", "zero", "full", "random", "urandom")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

# Hosts without namespaces (a Docker container, such as Gradescope's): a root grader can still
# give each child a uid of its own ("uid"), and the child can load a system-call filter, the
# install() of the module "filter" names, last before any student code. Off unless a caller
# (grader/gradescope/isolation.py) turns it on after probing that it works.
FALLBACK = {"uid": False, "filter": ""}


class ContainmentError(GraderFault):
    """Something of a job outlived it (a process that would not die, a file that could not be
    removed): the grader's fault to report, never a grade computed beside it."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _check(status: int, what: str) -> None:
    if status != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None, what: str) -> None:
    _check(_libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(), flags,
                       data and data.encode()), what)


def _set_mount_attr(path: str, attr_set: int, attr_clr: int, recursive: bool) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    _check(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE if recursive else 0,
                         ctypes.byref(attr), ctypes.sizeof(attr)), f"mount_setattr {path}")


def _lock_down(tmp_options: str | None) -> bool:
    """All mounts read-only, then (unless `tmp_options` is None) a private writable /tmp. Code
    the child runs from under /tmp (a checkout or venv there) is bound back into it, read-only."""
    try:
        # opened before /tmp is covered: afterwards these paths would name the empty tmpfs
        keep = {path: os.open(path, os.O_PATH) for path in _tmp_code_dirs()} if tmp_options is not None else {}
        _set_mount_attr("/", MOUNT_ATTR_RDONLY, 0, recursive=True)
        if tmp_options is not None:
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_options, "private /tmp")
            for path, fd in keep.items():
                os.makedirs(path, mode=0o755, exist_ok=True)
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None, f"bind {path}")
                _set_mount_attr(path, MOUNT_ATTR_RDONLY, 0, recursive=True)
                os.close(fd)
    except OSError:
        return False
    return True


# ----- the package-only view ------------------------------------------------------------------

def _module_location(name: str) -> str | None:
    import importlib.util
    module = sys.modules.get(name)
    spec = module.__spec__ if module is not None else importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return os.path.realpath(list(spec.submodule_search_locations)[0])
    return os.path.realpath(spec.origin) if spec.origin else None


@functools.lru_cache(maxsize=1)
def view_plan() -> tuple[tuple[str, str], ...]:
    """What a simulator child's root holds, as (path, kind) in mounting order: "bind" a host
    path at the same path, "link" copy a symlink, "empty" an empty directory (a tmpfs where it
    would cover bound content). Everything else does not exist for the child."""
    plan: dict[str, str] = {}
    for path in SYSTEM_PATHS:
        if os.path.islink(path) and path.count("/") == 1:
            plan[path] = "link"
        elif os.path.isdir(path):
            plan[os.path.realpath(path)] = "bind"
        elif os.path.exists(path):
            plan[path] = "bind"             # a file: at its own path (/etc/localtime is a link)
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            plan[f"/dev/{name}"] = "bind"
    # the interpreter and its standard library, but not its own site-packages
    base = os.path.realpath(sys.base_prefix)
    plan[base] = "bind"
    paths = sysconfig.get_paths(vars={"base": base, "platbase": base})
    for key in ("purelib", "platlib"):
        if os.path.isdir(paths[key]):
            plan[os.path.realpath(paths[key])] = "empty"
    # each package alone in an otherwise empty directory (site-packages, or the repository)
    for name in CHILD_PACKAGES:
        location = _module_location(name)
        if location is None:
            continue
        parent = os.path.dirname(location)
        plan.setdefault(parent, "empty")
        plan[location] = "bind"
        libs = os.path.join(parent, f"{name}.libs")       # shared libraries a wheel vendors
        if os.path.isdir(libs):
            plan[libs] = "bind"
    grader_dir = os.path.dirname(os.path.realpath(__file__))
    plan.setdefault(os.path.dirname(grader_dir), "empty")
    plan[grader_dir] = "empty"
    for name in CHILD_GRADER_FILES:
        if os.path.exists(os.path.join(grader_dir, name)):
            plan[os.path.join(grader_dir, name)] = "bind"
    return tuple(sorted(plan.items(), key=lambda item: item[0].split("/")))


def _make_point(target: str, is_dir: bool) -> None:
    """A mount point in the view; only ever created on a tmpfs of the view (a host path bound
    into the view already exists there)."""
    if is_dir:
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))


def _build_view(plan, job: str, hide: list[str], with_proc: bool) -> None:
    """Make a new root of only `plan`, the job directory (at its own path), /proc and a private
    /tmp, all read-only but /tmp, and pivot into it; the old root is detached."""
    # sources are opened first: the view's root is mounted over /tmp, where code may live
    entries = dict(plan)
    entries.update({"/tmp": "tmp", "/proc": "proc" if with_proc else "empty", job: "bind"})
    sources = {path: os.open(path, os.O_PATH) for path, kind in entries.items() if kind == "bind"}
    root = "/tmp"
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755", "view root")
    os.umask(0o022)
    for path, kind in sorted(entries.items(), key=lambda item: item[0].split("/")):
        target = root + path
        if kind == "link":
            os.symlink(os.readlink(path), target)
        elif kind == "bind":
            _make_point(target, os.path.isdir(f"/proc/self/fd/{sources[path]}"))
            _mount(f"/proc/self/fd/{sources[path]}", target, None, MS_BIND | MS_REC, None, f"bind {path}")
            os.close(sources[path])
        elif kind in ("empty", "tmp") and os.path.isdir(target) and os.listdir(target):
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755", f"cover {path}")
        else:
            _make_point(target, True)
            if kind == "tmp":
                _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777", "private /tmp")
            elif kind == "proc":
                _mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "/proc")
    for path in hide:         # a configured path that a bound directory would still show
        target = root + path
        if os.path.isdir(target) and not (job + "/").startswith(path.rstrip("/") + "/"):
            _mount("tmpfs", target, "tmpfs", 0, "size=1m,mode=0700", f"hide {path}")
    _set_mount_attr(root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, recursive=True)
    _set_mount_attr(root + "/tmp", 0, MOUNT_ATTR_RDONLY, recursive=False)
    os.chdir(root)
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the old root")
    os.chdir(job)


# ----- privileges ---------------------------------------------------------------------------

def _drop_privileges(uid: int) -> None:
    """Become `uid` (a number no other process uses) with no groups, capabilities or way back."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")


@functools.lru_cache(maxsize=1)
def _code_dirs() -> tuple[str, ...]:
    """Where the Python the child runs lives: its interpreter, its environment and the checkout
    holding the grader."""
    grader_dir = os.path.dirname(os.path.realpath(__file__))
    return tuple(sorted({os.path.realpath(d) for d in (sys.prefix, sys.base_prefix, os.path.dirname(grader_dir))}))


def _code_under_tmp() -> bool:
    """Is /tmp itself where the child's Python lives? Then no private /tmp can be given: it
    would hide that code."""
    return "/tmp" in _code_dirs()


@functools.lru_cache(maxsize=1)
def _tmp_code_dirs() -> tuple[str, ...]:
    """The child's code directories under /tmp (a checkout or venv there, as CI may use), the
    outermost of each nest: a private /tmp gets them bound back."""
    under = [d for d in _code_dirs() if d.startswith("/tmp/")]
    return tuple(d for d in under if not any(d.startswith(o + "/") for o in under))


# ----- a uid of the job's own, and the end of everything of it ---------------------------------

@dataclass
class _UidClaim:
    uid: int
    fd: int            # the locked file: the claim lasts while this process holds it
    path: str


def _uid_lock_dir() -> str:
    """The directory of the uid lock files: only root may write it, and every grader process on
    the machine uses the same one."""
    tried = []
    for parent in UID_LOCK_DIRS:
        path = os.path.join(parent, "nkigrader-uids")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as err:
            tried.append(f"{path}: {err.strerror}")
            continue
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o077:
            return path
        tried.append(f"{path}: not a directory root alone may write")
    raise ContainmentError("no directory to claim a uid per job in (" + "; ".join(tried) + "): remove what is "
                           "there, or make /run writable for root")


def _claim_uid() -> _UidClaim:
    """A uid no other job on this machine holds and no account uses, held until _release_uid.
    A uid whose last holder died without releasing it has its leftovers ended first."""
    directory = _uid_lock_dir()
    for uid in itertools.chain((secrets.choice(CLAIMABLE_UIDS) for _ in range(64)), CLAIMABLE_UIDS):
        claim = _try_claim(directory, uid)
        if claim is not None:
            return claim
    raise ContainmentError(f"every uid from {CLAIMABLE_UIDS.start} to {CLAIMABLE_UIDS.stop - 1} is held by another "
                           f"job (lock files in {directory}): too many jobs at once on this machine")


def _try_claim(directory: str, uid: int) -> _UidClaim | None:
    try:
        pwd.getpwuid(uid)
        return None                 # an account's uid: its processes and files are not a job's
    except KeyError:
        pass
    path = os.path.join(directory, str(uid))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            raise FileNotFoundError(path)       # its last holder removed it as this one opened it
        if os.fstat(fd).st_size:                # a holder that died holding it
            _end_uid(uid)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except (OSError, ContainmentError):
        os.close(fd)
        return None
    return _UidClaim(uid, fd, path)


def _release_uid(claim: _UidClaim, ended: bool = True) -> None:
    """Give the uid back. Not `ended` (its processes or files could not all be removed): its
    lock file stays, so whoever claims it next ends what is left first."""
    if ended:
        os.unlink(claim.path)               # while locked: no other holder can be using it
    os.close(claim.fd)


def _end_uid(uid: int, deadline_s: float = END_UID_SECONDS) -> None:
    """End everything of a job's uid, as a job without a PID namespace or cgroup can leave it:
    every process (the job's group and session alone miss one that called setsid), then its
    SysV IPC objects and its files where any uid may make them. Raises ContainmentError when
    something will not go."""
    _kill_uid(uid, deadline_s)
    _remove_ipc_of(uid)
    left = _remove_files_of(uid)
    if left:
        raise ContainmentError(f"files of a job (uid {uid}) could not be removed: {', '.join(left[:5])}")


def _processes_of(uid: int) -> list[int]:
    """The processes whose real, effective or saved uid is `uid` and that can still run (a
    zombie's threads may run on: it counts while it has any)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                status = fh.read()
        except OSError:
            continue                # ended meanwhile
        if uid not in [int(v) for v in _status_field(status, b"Uid")[:3]]:
            continue
        if _status_field(status, b"State")[:1] not in ([b"Z"], [b"X"]) or int(_status_field(status, b"Threads")[0]) > 1:
            found.append(int(name))
    return found


def _status_field(status: bytes, key: bytes) -> list[bytes]:
    start = status.find(b"\n" + key + b":")
    if start < 0:
        return [b"0"]
    start += len(key) + 2
    return status[start:status.find(b"\n", start)].split()


def _kill_uid(uid: int, deadline_s: float) -> None:
    """SIGKILL every process of `uid`, again and again until none is left: a process may fork
    while the last one is killed (a killed process no longer can)."""
    end = time.monotonic() + deadline_s
    rounds = 0
    while True:
        pids = _processes_of(uid)
        if not pids:
            return
        for pid in pids:
            _kill_process(pid)
        if time.monotonic() > end:
            raise ContainmentError(f"{len(pids)} processes of a job (uid {uid}, pids {pids[:10]}) were still "
                                   f"alive {deadline_s:g} s after SIGKILL; this machine cannot contain a job")
        rounds += 1
        time.sleep(min(0.001 * 2 ** rounds, 0.05))      # dying takes a moment


def _remove_ipc_of(uid: int) -> None:
    """SysV shared memory, semaphores and message queues the uid owns or made: outside an IPC
    namespace they outlive every process."""
    removers = {"shm": lambda i: _libc.shmctl(i, IPC_RMID, None), "sem": lambda i: _libc.semctl(i, 0, IPC_RMID),
                "msg": lambda i: _libc.msgctl(i, IPC_RMID, None)}
    for kind, remove in removers.items():
        try:
            lines = Path("/proc/sysvipc", kind).read_text().splitlines()
            header = lines[0].split()
            owner, creator = header.index("uid"), header.index("cuid")
        except (OSError, IndexError, ValueError):
            continue
        for line in lines[1:]:
            fields = line.split()
            if uid in (int(fields[owner]), int(fields[creator])):
                remove(int(fields[1]))


def _remove_files_of(uid: int) -> list[str]:
    """Remove what `uid` owns in SCRATCH_DIRS and in the world-writable directories below them;
    the paths that would not go."""
    left: list[str] = []
    for top in SCRATCH_DIRS:
        try:
            fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            _remove_owned(fd, top, uid, 0, left)
        finally:
            os.close(fd)
    return left


def _remove_owned(dir_fd: int, path: str, uid: int, depth: int, left: list[str]) -> None:
    """Never through a symbolic link: entries are looked at with lstat, directories opened with
    O_NOFOLLOW, and everything removed relative to its directory's descriptor."""
    with os.scandir(dir_fd) as entries:
        found = list(entries)
    for entry in found:
        where = f"{path}/{entry.name}"
        try:
            st = entry.stat(follow_symlinks=False)
            if st.st_uid == uid:
                if stat.S_ISDIR(st.st_mode):
                    _remove_tree(entry.name, dir_fd, where)
                else:
                    os.unlink(entry.name, dir_fd=dir_fd)
            elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and depth < SCRATCH_DEPTH:
                fd = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
                try:
                    _remove_owned(fd, where, uid, depth + 1, left)
                finally:
                    os.close(fd)
        except FileNotFoundError:
            continue                # removed meanwhile (kill_all_children ends a job's uid as well)
        except OSError:
            left.append(where)


def _remove_tree(name: str, dir_fd: int, where: str) -> None:
    try:
        shutil.rmtree(name, dir_fd=dir_fd)
    except RecursionError:          # deeper than Python's stack: rm walks without recursion
        subprocess.run(["rm", "-rf", "--one-file-system", "--", where], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def _end_job_uid(claim: _UidClaim | None, sweep: bool) -> None:
    """After a job: end what its uid left (`sweep`: no PID namespace and private /tmp did it),
    then give the uid back."""
    if claim is None:
        return
    try:
        if sweep:
            _end_uid(claim.uid)
    except BaseException:
        _release_uid(claim, ended=False)
        raise
    _release_uid(claim)


# ----- limits, results, capabilities ----------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 600.0
    cpu_seconds: int = 900
    memory_bytes: int = 8 * 2**30        # address space (RLIMIT_AS)
    resident_bytes: int | None = None    # memory cgroup (shared memory included); None: memory_bytes
    file_bytes: int = 64 * 2**20
    open_files: int = 256
    processes: int = 64
    output_bytes: int = 64 * 1024        # kept of stdout and of stderr each
    result_bytes: int = 1 * 2**30        # cap on what the child may send back


@dataclass
class ChildResult:
    returncode: int | None
    timed_out: bool
    stdout: str
    stderr: str
    result: bytes | bytearray            # everything written to the result pipe (capped)
    result_truncated: bool
    wall_seconds: float
    killed_by: str = ""                  # "timeout", "cancelled", "memory limit", "signal N", ""
    cancelled: bool = False
    cpu_seconds: float | None = None     # the child's CPU time (user + system); None when not known

    @property
    def output(self) -> str:
        parts = [p for p in (self.stdout.strip(), self.stderr.strip()) if p]
        return "\n".join(parts)


@dataclass
class Capabilities:
    net: bool = False
    pid: bool = False
    ipc: bool = False                   # own SysV IPC and POSIX message queues
    uts: bool = False                   # own host name
    private_proc: bool = False          # the PID namespace's own /proc
    mount: bool = False
    readonly: bool = False
    package_view: bool = False          # sim children see only view_plan()
    private_tmp: bool = False
    unprivileged: bool = False          # the child drops to a uid of its own (a root grader)
    pids_cgroup: str = ""               # parent of the per-job pids cgroups, "" when unavailable
    memory_cgroup: str = ""             # parent of the per-job memory cgroups, "" when unavailable
    parent_death: bool = False          # children die with the grader (prctl PR_SET_PDEATHSIG)
    notes: list[str] = field(default_factory=list)

    FLAGS = ("net", "pid", "ipc", "uts", "private_proc", "mount", "readonly", "package_view", "private_tmp", "unprivileged",
             "pids_cgroup", "memory_cgroup", "parent_death")

    def describe(self) -> str:
        on = [n for n in self.FLAGS if getattr(self, n)]
        return "confinement: " + (", ".join(on) if on else "none (rlimits and timeouts only)")


_caps: Capabilities | None = None
_caps_lock = threading.Lock()


def _forked_status(body) -> bool:
    """Run `body()` in a throwaway fork; True when it returns True without raising."""
    pid = os.fork()
    if pid == 0:
        try:
            ok = bool(body())
        except BaseException:       # noqa: BLE001 - any failure means "not available"
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _probe_confinement(conf: dict) -> bool:
    """Does the real confinement work with these settings? Checked from inside it, on a job
    directory of its own: the view's code is readable and /proc shows only the namespace's
    own processes."""
    import tempfile
    job = tempfile.mkdtemp(prefix="nkigrader-probe-")

    def body():
        os.chdir(job)
        _enter(dict(conf, job=job), parent_check=None)
        for path, kind in conf["view"] or ():
            if kind == "bind" and os.path.isdir(path):
                os.listdir(path)
        if conf["flags"] & CLONE_NEWPID and sorted(int(p) for p in os.listdir("/proc") if p.isdigit()) != [1]:
            return False
        return True
    try:
        return _forked_status(body)
    finally:
        shutil.rmtree(job, ignore_errors=True)


def capabilities() -> Capabilities:
    global _caps
    with _caps_lock:
        if _caps is None:
            _caps = _detect()
        return _caps


def _detect() -> Capabilities:
    caps = Capabilities()
    if not sys.platform.startswith("linux"):
        caps.notes.append("not Linux: rlimits and timeouts only")
        return caps
    caps.parent_death = True
    root = os.geteuid() == 0
    userns = 0 if root else CLONE_NEWUSER
    caps.net = _forked_status(lambda: _libc.unshare(userns | CLONE_NEWNET) == 0)
    caps.pid = _forked_status(lambda: _libc.unshare(userns | CLONE_NEWPID) == 0)
    caps.ipc = _forked_status(lambda: _libc.unshare(userns | CLONE_NEWIPC) == 0)
    caps.uts = _forked_status(lambda: _libc.unshare(userns | CLONE_NEWUTS) == 0)
    caps.mount = root and _forked_status(lambda: _libc.unshare(CLONE_NEWNS) == 0)
    _tmp_code_dirs()      # worked out here: the probes fork this process and must not compute it
    caps.readonly = caps.mount and _forked_status(
        lambda: _libc.unshare(CLONE_NEWNS) == 0 and _libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0
        and _lock_down("size=1m"))
    # the probes fork this (perhaps threaded) process: nothing in them may import or take a lock
    plan = view_plan()
    base = {"flags": (CLONE_NEWPID if caps.pid else 0) | CLONE_NEWNS, "hide": [], "cgroups": [],
            "readonly": True, "uid": None, "limits": None, "legacy_proc": False}
    if caps.readonly and caps.pid and SYS_PIVOT_ROOT is not None:
        caps.package_view = _probe_confinement(dict(base, view=plan))
        caps.unprivileged = caps.package_view and _probe_confinement(dict(base, view=plan, uid=CHILD_UIDS.start))
    caps.private_proc = caps.pid and caps.mount and (caps.package_view or _probe_confinement(dict(base, view=None)))
    caps.private_tmp = caps.package_view or (caps.readonly and not _code_under_tmp())
    if root:
        caps.pids_cgroup = _cgroup_parent("pids", "pids.max")
        caps.memory_cgroup = _cgroup_parent("memory", "memory.max", "memory.limit_in_bytes")
    return caps


# ----- cgroups ------------------------------------------------------------------------------

def _cgroup_mounts() -> tuple[dict[str, str], str]:
    """Mount points of the cgroup v1 controllers and of the v2 hierarchy."""
    v1: dict[str, str] = {}
    v2 = ""
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            if tail[0] == "cgroup":
                for option in tail[2].split(","):
                    v1.setdefault(option, fields[4])
            elif tail[0] == "cgroup2":
                v2 = v2 or fields[4]
    return v1, v2


def _cgroup_parent(controller: str, *control_files: str) -> str:
    """Where this process may create job cgroups with `controller`: below its own cgroup (so
    jobs stay inside whatever limits the grader itself runs under), or for cgroup v2 the root
    when the grader's own cgroup cannot delegate. Tried by creating and removing one."""
    try:
        v1, v2 = _cgroup_mounts()
        own: dict[str, str] = {}
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    own[c] = path
    except (OSError, ValueError):
        return ""
    candidates = []
    if controller in v1:
        candidates.append(os.path.normpath(os.path.join(v1[controller], own.get(controller, "/").lstrip("/"))))
    elif v2:
        for where in (os.path.normpath(os.path.join(v2, own.get("", "/").lstrip("/"))), v2):
            try:
                if controller in Path(where, "cgroup.subtree_control").read_text().split():
                    candidates.append(where)
            except OSError:
                pass
    for parent in candidates:
        trial = Path(parent, f"nkigrader-probe-{uuid.uuid4().hex[:8]}")
        try:
            trial.mkdir()
        except OSError:
            continue
        found = any((trial / name).exists() for name in control_files)
        _remove_cgroup(str(trial))
        if found:
            return parent
    return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _make_cgroups(caps: Capabilities, limits: Limits) -> list[str]:
    """A pids cgroup and a memory cgroup for one job (either may be unavailable)."""
    made = []
    name = f"nkigrader-{uuid.uuid4().hex[:12]}"
    memory = limits.resident_bytes if limits.resident_bytes is not None else limits.memory_bytes
    for parent, settings in ((caps.pids_cgroup, [("pids.max", str(limits.processes))]),
                             (caps.memory_cgroup, [("memory.max", str(memory)), ("memory.swap.max", "0"),
                                                   ("memory.limit_in_bytes", str(memory)),
                                                   ("memory.memsw.limit_in_bytes", str(memory)),
                                                   ("memory.swappiness", "0")])):
        if not parent:
            continue
        path = Path(parent, name)
        try:
            if str(path) not in made:       # cgroup v2: both controllers in one hierarchy, one cgroup
                path.mkdir()
                made.append(str(path))
            for control, value in settings:      # v1 and v2 names: write the ones this one has
                if (path / control).exists():
                    _write(path / control, value)
        except OSError:
            continue
    return made


def _memory_exceeded(cgroups: list[str]) -> bool:
    """Did the kernel kill a process of the job for going over its memory cgroup's limit?"""
    for path in cgroups:
        for name in ("memory.events", "memory.oom_control"):
            try:
                text = Path(path, name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                    return True
    return False


def _signal_cgroup(path: str) -> bool:
    """SIGKILL every process in the cgroup once; True when it was already empty."""
    try:
        pids = [int(p) for p in Path(path, "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return True
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return not pids


def _kill_cgroups(paths: list[str], deadline_s: float = 10.0) -> None:
    """Kill every process still in the job's cgroups (children that left the process group),
    until they are empty."""
    end = time.monotonic() + deadline_s
    for path in paths:
        while not _signal_cgroup(path) and time.monotonic() < end:
            time.sleep(0.01)


def _remove_cgroup(path: str, deadline_s: float = 10.0) -> None:
    end = time.monotonic() + deadline_s
    while path:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > end:
                return
            time.sleep(0.01)    # members still exiting


# ----- running a child ----------------------------------------------------------------------

def _reader(stream, limit: int, sink: list, truncated: list) -> None:
    """Keep the first `limit` bytes of a stream and drain (discard) the rest."""
    kept = bytearray()
    with stream:                # closed at EOF: nothing else owns it
        while True:
            chunk = stream.read(65536)
            if not chunk:
                break
            room = limit - len(kept)
            if room > 0:
                kept += chunk[:room]
            if len(chunk) > max(room, 0):
                truncated.append(True)
    sink.append(kept)


def _module_of(argv: list[str]) -> str | None:
    """The module of a `python -I -m MODULE` command line, which the zygote can run."""
    if len(argv) == 4 and argv[0] == sys.executable and argv[1:3] == ["-I", "-m"]:
        return argv[3]
    return None


def _launch(argv: list[str], workdir: str, env: dict[str, str], fds: tuple[int, int, int],
            shared: tuple[int, ...] = ()):
    """Start the child through the zygote when it can run it, else as a fresh process. `shared`:
    more descriptors the child inherits, their numbers in GRADER_SHARED_FD (comma-separated)."""
    module = _module_of(argv)
    if module is not None:
        child = ZYGOTE.spawn(module, workdir, env, fds + tuple(shared))
        if child is not None:
            return child
    out, err, result = fds
    extra = {"GRADER_SHARED_FD": ",".join(str(fd) for fd in shared)} if shared else {}
    return subprocess.Popen(argv, cwd=workdir, env=dict(env, GRADER_RESULT_FD=str(result),
                                                        GRADER_PARENT_PID=str(os.getpid()), **extra),
                            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                            pass_fds=(result, *shared), start_new_session=True, close_fds=True)


@dataclass
class _Job:
    proc: object
    workdir: str
    cgroups: list[str]
    cancelled: bool = False
    uid: int | None = None          # a uid whose every process and file ends with the job (no PID namespace)


# Every child running now, by id. Changed only by single dict operations, which are atomic
# under the GIL, so kill_all_children() may run in a signal handler without a lock.
_RUNNING: dict[int, _Job] = {}


def _kill(job: _Job) -> None:
    # the child itself as well as its group: a kill that comes just after the launch can find
    # the child not yet in a group of its own (it calls setsid first thing, but may not have run)
    if job.proc.returncode is None:         # not reaped yet, so the pid is still the child's
        _kill_process(job.proc.pid)
    _kill_group(job.proc.pid)
    for path in job.cgroups:
        _signal_cgroup(path)


def _kill_and_reap(job: _Job) -> None:
    """Kill the child and wait for its end, killing again every second: a grade must never
    wait for ever on a child that a kill somehow missed."""
    while True:
        _kill(job)
        try:
            job.proc.wait(timeout=1.0)
            return
        except subprocess.TimeoutExpired:
            continue


def kill_all_children() -> int:
    """Kill every child running now, with their process groups and cgroups, and remove their
    job directories; each run_child returns a result marked cancelled. Safe from a signal
    handler or another thread. Returns how many children there were."""
    jobs = list(_RUNNING.values())
    for job in jobs:
        job.cancelled = True
        _kill(job)
    for job in jobs:
        shutil.rmtree(job.workdir, ignore_errors=True)
        if job.uid is not None:     # here too: a caller may exit at once (the Gradescope watchdog does)
            try:
                _end_uid(job.uid)
            except ContainmentError as err:
                print(f"grader: {err}", file=sys.stderr, flush=True)    # run_child raises it as well
    return len(jobs)


def run_child(argv: list[str], workdir: str, *, limits: Limits, env: dict[str, str],
              hide_paths: tuple[str, ...] = (), own_uid: bool = True,
              cancel: threading.Event | None = None, view_extra: tuple[str, ...] = (),
              shared_fds: tuple[int, ...] = ()) -> ChildResult:
    """Run `argv` (a Python child that calls `enter()` first) in `workdir` under the sandbox;
    the child finds the result pipe's descriptor in GRADER_RESULT_FD. No preexec_fn: the
    grader runs tests from several threads, where forking with Python code is unsafe, so the
    child confines itself (enter) before it loads any student code. `own_uid=False` (the
    neuron backend) keeps the grader's uid and the host's file system view, read-only, as
    Neuron device nodes and runtime files are not open to an arbitrary uid. Setting `cancel`
    kills the child's whole process group at once and returns a result marked cancelled (its
    job directory removed). `view_extra`: more files or directories the child may read (a
    trusted process that runs another grader module, say), beside view_plan(). `shared_fds`:
    descriptors the child inherits as well (only trusted children get any: the memory the
    executor shares with the grader, grader.sharedmem), their numbers in the child's
    GRADER_SHARED_FD, comma-separated."""
    caps = capabilities()
    view = own_uid and caps.package_view
    # a uid of the job's own; without the view's PID namespace and private /tmp (the Gradescope
    # fallback) that uid is all that finds the job's processes and files, ended with the job
    claim = _claim_uid() if (view and caps.unprivileged) or (
        own_uid and FALLBACK["uid"] and os.geteuid() == 0) else None
    sweep = claim is not None and not view
    cgroups = _make_cgroups(caps, limits)
    userns = 0 if os.geteuid() == 0 else CLONE_NEWUSER
    flags = (CLONE_NEWNET if caps.net else 0) | (CLONE_NEWPID if caps.pid else 0)
    flags |= CLONE_NEWNS if caps.mount else 0
    flags |= (CLONE_NEWIPC if caps.ipc else 0) | (CLONE_NEWUTS if caps.uts else 0)
    if flags:
        flags |= userns
    plan = [list(entry) for entry in view_plan()] + [[os.path.realpath(p), "bind"] for p in view_extra]
    confinement = {"flags": flags, "hide": [os.path.realpath(p) for p in hide_paths if os.path.isdir(p)],
                   "cgroups": cgroups, "readonly": caps.readonly, "view": plan if view else None,
                   "legacy_proc": not caps.private_proc,
                   "uid": claim.uid if claim is not None else None,
                   "filter": FALLBACK["filter"] if own_uid else "",
                   "limits": {"memory": limits.memory_bytes, "cpu": limits.cpu_seconds, "file": limits.file_bytes,
                              "files": limits.open_files, "processes": limits.processes}}
    child_env = dict(env, GRADER_SANDBOX=json.dumps(confinement))
    pipes = [os.pipe() for _ in range(3)]            # stdout, stderr, result
    start = time.monotonic()
    try:
        proc = _launch(argv, workdir, child_env, tuple(w for _, w in pipes), tuple(shared_fds))
    except BaseException:
        for r, _ in pipes:
            os.close(r)
        for path in cgroups:
            _remove_cgroup(path)
        _end_job_uid(claim, sweep)
        raise
    finally:
        for _, w in pipes:
            os.close(w)
    job = _Job(proc, workdir, cgroups, uid=claim.uid if sweep else None)
    _RUNNING[id(job)] = job
    outs: list = []
    errs: list = []
    results: list = []
    cut: list = []
    readers = [(outs, limits.output_bytes, []), (errs, limits.output_bytes, []), (results, limits.result_bytes, cut)]
    threads = [threading.Thread(target=_reader, args=(os.fdopen(r, "rb", buffering=0), limit, sink, flag),
                                daemon=True) for (r, _), (sink, limit, flag) in zip(pipes, readers)]
    for t in threads:
        t.start()
    timed_out = False
    try:
        timed_out = _wait(job, start + limits.wall_seconds, cancel)
    finally:
        _kill_and_reap(job)
        _kill_cgroups(cgroups)
        del _RUNNING[id(job)]
        try:
            _end_job_uid(claim, sweep)      # before the result: nothing of the job runs on beside its grade
        except ContainmentError:
            for path in cgroups:
                _remove_cgroup(path)
            raise
    for t in threads:
        t.join(timeout=10)
    memory = _memory_exceeded(cgroups)
    for path in cgroups:
        _remove_cgroup(path)
    if job.cancelled:
        shutil.rmtree(workdir, ignore_errors=True)
    wall = time.monotonic() - start
    rc = proc.returncode
    killed = ("cancelled" if job.cancelled else "timeout" if timed_out else "memory limit" if memory else
              f"signal {-rc}" if rc is not None and rc < 0 else
              f"signal {rc - 128}" if rc is not None and rc > 128 else "")
    return ChildResult(rc, timed_out, _text(outs), _text(errs), results[0] if results else b"", bool(cut),
                       wall, killed, cancelled=job.cancelled, cpu_seconds=getattr(proc, "cpu_seconds", None))


def _wait(job: _Job, deadline: float, cancel: threading.Event | None) -> bool:
    """Wait for the child to end, the deadline (True) or the cancel event."""
    # without an event to watch, one wait to the deadline; with one, short waits between looks
    step = 0.05 if cancel is not None else None
    while True:
        if cancel is not None and cancel.is_set():
            job.cancelled = True
        if job.cancelled:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        try:
            job.proc.wait(timeout=left if step is None else min(step, left))
            return False
        except subprocess.TimeoutExpired:
            continue


# ----- the child's side -----------------------------------------------------------------------

def enter() -> bool:
    """Called first thing in the child: confine this process as GRADER_SANDBOX says. With a PID
    namespace this process stays outside as a reaper that waits for the namespace's first
    process (which returns from here to run the job) and passes its exit status up; if the
    grader dies, the reaper kills the namespace, removes the job directory and cgroups.
    Always returns False (no further fork is needed)."""
    raw = os.environ.pop("GRADER_SANDBOX", None)
    parent = os.environ.pop("GRADER_PARENT_PID", "")
    if raw is None:
        return False
    conf = json.loads(raw)
    conf["job"] = os.getcwd()
    _enter(conf, parent_check=int(parent) if parent.isdigit() else None)
    return False


def end_namespace(pid: int, conf: dict) -> None:
    """Kill a job's PID namespace through its first process, then remove its job directory and
    cgroups: what an orphaned reaper or monitor does in the grader's place."""
    try:
        os.kill(pid, signal.SIGKILL)        # the namespace ends with its first process
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    _cleanup(conf)


def _cleanup(conf: dict) -> None:
    """The grader is gone: remove what it would have removed."""
    shutil.rmtree(conf["job"], ignore_errors=True)
    for path in conf["cgroups"]:
        _signal_cgroup(path)
        _remove_cgroup(path, deadline_s=5.0)


def _enter(conf: dict, parent_check: int | None) -> None:
    def orphaned(*_):
        _cleanup(conf)
        os._exit(128 + signal.SIGKILL)

    # the first process of a PID namespace the zygote's monitor made: the monitor checked it was
    # alive and cleans up should the grader go (grader.zygote._clean_up_if_orphaned)
    if parent_check is not None and not conf.get("pid_namespace_made"):
        signal.signal(signal.SIGTERM, orphaned)
        if not set_parent_death_signal(signal.SIGTERM, parent_check):
            orphaned()
    flags = conf["flags"]
    outer = flags & ~CLONE_NEWNS
    if outer and _libc.unshare(outer) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")
    if flags & CLONE_NEWPID:
        _reap_namespace(conf, parent_check is not None)     # returns in the namespace's first process
    for path in conf["cgroups"]:
        _write(Path(path, "cgroup.procs"), "0")
    if flags & CLONE_NEWNS:
        _check(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
        _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
        in_pid_ns = bool(flags & CLONE_NEWPID) or bool(conf.get("pid_namespace_made"))
        if conf["view"]:
            _build_view(conf["view"], conf["job"], conf["hide"], with_proc=in_pid_ns)
        else:
            for path in conf["hide"]:
                _mount("tmpfs", path, "tmpfs", 0, "size=1m,mode=0700", f"hide {path}")
            if os.path.isdir("/dev/shm"):     # POSIX shared memory: a file system, not the IPC namespace
                _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777", "private /dev/shm")
            if in_pid_ns and not conf.get("legacy_proc"):
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "/proc")
            if conf["readonly"] and not _lock_down(None if _code_under_tmp() else "size=64m,mode=1777"):
                raise OSError(ctypes.get_errno(), "cannot make the file system read-only")
        if conf["readonly"] and conf.get("uid") is None:
            _check(_libc.unshare(CLONE_NEWUSER), "unshare the user namespace")
    lim = conf["limits"]
    if lim is not None:
        for res, value in ((resource.RLIMIT_AS, lim["memory"]), (resource.RLIMIT_CPU, lim["cpu"]),
                           (resource.RLIMIT_FSIZE, lim["file"]), (resource.RLIMIT_NOFILE, lim["files"]),
                           (resource.RLIMIT_NPROC, lim["processes"]), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(res, (value, value))
    if conf.get("uid") is not None:
        _drop_privileges(conf["uid"])
    if conf.get("filter"):
        import importlib
        importlib.import_module(conf["filter"]).install()
    # a credential change clears the parent-death signal: set it (again) last; the cleanup
    # on SIGTERM belongs to a reaper, never to the process that runs the kernel
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _reap_namespace(conf: dict, clean_up: bool) -> None:
    """Fork the PID namespace's first process, which returns; this process waits for it and
    exits with its status. Should this process's parent die (the grader, or the fork server's
    monitor), it gets SIGTERM: it kills the namespace and cleans up."""
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if writer_gone(alive_r):                 # the reaper died before the prctl
            os._exit(128 + signal.SIGKILL)
        return
    os.close(alive_r)

    def orphaned(*_):
        end_namespace(pid, conf)
        os._exit(128 + signal.SIGKILL)

    if clean_up:
        signal.signal(signal.SIGTERM, orphaned)
    _, status = os.waitpid(pid, 0)
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _text(chunks: list) -> str:
    return (chunks[0] if chunks else b"").decode("utf-8", errors="replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_process(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def minimal_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Just enough environment for Python and BLAS; nothing of the grader's own but the BLAS
    kernels it runs (OPENBLAS_CORETYPE: every process of a grade computes a product alike)."""
    from .jobs import blas_kernels
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/nonexistent",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    kernels = blas_kernels()
    if kernels is not None:
        env["OPENBLAS_CORETYPE"] = kernels[1]
    env.update(extra or {})
    return env

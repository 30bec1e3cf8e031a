"""CPU accounting for the load benches, so a figure taken on a shared machine says what it cost
and what else ran meanwhile.

- CpuGroup: a cgroup (v1 cpuacct, else v2) that counts every process started in it and all
  their descendants, the sandboxed children a zygote forks included (rusage misses those: they
  are not the grader's children). Needs root; without it, seconds() is None and benches print
  wall times only.
- Machine: the machine's busy and stolen CPU-seconds from /proc/stat (steal: time the
  hypervisor gave our virtual CPUs to someone else)."""
from __future__ import annotations

import os
from pathlib import Path

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup/unified") if Path("/sys/fs/cgroup/unified/cgroup.procs").exists() else Path("/sys/fs/cgroup")


class CpuGroup:
    def __init__(self, name: str, parent: "CpuGroup | None" = None) -> None:
        self.path: Path | None = None
        bases = [parent.path] if parent is not None else [V1, V2]
        for base in bases:
            if base is None or not (base / "cgroup.procs").exists():
                continue
            try:
                (base / name).mkdir(exist_ok=True)
            except OSError:
                continue
            self.path = base / name
            break

    def join(self, pid: int | None = None) -> None:
        """Move a process (default: this one) into the group; its later children start in it."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(pid or os.getpid()))

    def seconds(self) -> float | None:
        if self.path is None:
            return None
        if (self.path / "cpuacct.usage").exists():
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None

    def remove(self) -> None:
        """Remove the group once its processes are gone (theirs move up to the parent first)."""
        if self.path is None:
            return
        for sub in [p for p in self.path.iterdir() if p.is_dir()]:
            _remove(sub)
        _remove(self.path)


def _remove(path: Path) -> None:
    parent = path.parent / "cgroup.procs"
    try:
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                parent.write_text(pid)
            except OSError:
                pass
        path.rmdir()
    except OSError:                 # still busy: left for the next boot (an empty group costs nothing)
        pass


class Machine:
    """Busy and stolen CPU-seconds of the whole machine since boot."""

    @staticmethod
    def sample() -> tuple[float, float]:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
        tick = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        return (user + nice + system + irq + softirq) / tick, steal / tick

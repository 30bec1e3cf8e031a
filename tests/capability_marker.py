"""`@pytest.mark.needs("pid_namespace", ...)`: a security test that needs something from the
machine (a namespace, a cgroup, root). A protection is never tested by a quiet pass:

- under `CI=true` a missing capability FAILS the test, naming it and how to provide it
  (`.ci/run` runs as root and sets CI, so every protection is exercised there);
- elsewhere the test is skipped, and the session ends with a loud list of every protection
  that went untested on this machine, and how to test it.

tests/conftest.py re-exports the hooks below; tests/test_capability_marker.py tests them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import pytest

ROOT_OR_USERNS = ("run the tests as root, or allow unprivileged user namespaces "
                  "(`sysctl -w kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 also "
                  "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`); in Docker, "
                  "`--security-opt seccomp=unconfined --cap-add SYS_ADMIN` or `--privileged`")
ROOT_WITH_MOUNTS = ("run the tests as root where mount namespaces work (in Docker: `--privileged`, "
                    "or `--cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined`)")
ROOT_WITH_CGROUPS = ("run the tests as root with a writable cgroup file system that delegates the {c} controller "
                     "(cgroup v2: `{c}` in cgroup.subtree_control of this process's cgroup or the root; in Docker: "
                     "`--privileged --cgroupns=private`; `.ci/run` enables it)")


@dataclass(frozen=True)
class Capability:
    protects: str                          # what goes untested without it, in a user's words
    present: Callable[[], bool]
    how: str                               # how to provide it


def _caps():
    from grader.sandbox import capabilities
    return capabilities()


CAPABILITIES: dict[str, Capability] = {
    "pid_namespace": Capability(
        "a kernel cannot signal the grader or other processes (PID namespace)",
        lambda: _caps().pid, ROOT_OR_USERNS),
    "net_namespace": Capability(
        "a kernel has no network, not even loopback to the broker (network namespace)",
        lambda: _caps().net, ROOT_OR_USERNS),
    "private_proc": Capability(
        "a kernel sees no host process nor the grader's command line (private /proc)",
        lambda: _caps().private_proc, ROOT_WITH_MOUNTS),
    "package_view": Capability(
        "a kernel sees only its job and the packages: no tests, specs, references or other jobs",
        lambda: _caps().package_view, ROOT_WITH_MOUNTS),
    "own_uid": Capability(
        "a kernel runs as a uid of its own and cannot read the grader's private files",
        lambda: _caps().unprivileged, ROOT_WITH_MOUNTS),
    "memory_cgroup": Capability(
        "memory held outside the address space (memfd) is capped (memory cgroup)",
        lambda: bool(_caps().memory_cgroup), ROOT_WITH_CGROUPS.format(c="memory")),
    "process_cap": Capability(
        "a fork bomb stops at the process cap (a pids cgroup; RLIMIT_NPROC does not bind root)",
        lambda: bool(_caps().pids_cgroup) or os.geteuid() != 0, ROOT_WITH_CGROUPS.format(c="pids")),
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*capabilities): a security test that needs these capabilities "
                                       f"of the machine, one of {', '.join(CAPABILITIES)}")


def missing_for(item) -> list[str]:
    """Capabilities the item's `needs` markers ask for that this machine lacks (a clear error on a
    name no one defined: a typo must not turn into a skip)."""
    missing = []
    for mark in item.iter_markers("needs"):
        if not mark.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.needs() names no capability")
        for name in mark.args:
            if name not in CAPABILITIES:
                raise pytest.UsageError(f"{item.nodeid}: unknown capability {name!r} in @pytest.mark.needs; "
                                        f"known: {', '.join(CAPABILITIES)}")
            if not CAPABILITIES[name].present() and name not in missing:
                missing.append(name)
    return missing


def _said(missing: list[str]) -> str:
    return "; ".join(f"{name} ({CAPABILITIES[name].protects}): {CAPABILITIES[name].how}" for name in missing)


SKIPPED_FOR_WANT_OF = "UNTESTED PROTECTION, missing "


def pytest_runtest_setup(item):
    """Locally: skip before any fixture starts; the skip's reason names what went untested."""
    missing = missing_for(item)
    if missing and not in_ci():
        pytest.skip(SKIPPED_FOR_WANT_OF + ", ".join(missing))


def _untested(skipped_reports) -> dict[str, list[str]]:
    """capability -> test ids skipped for want of it, from the skips' reports: the process that
    prints the summary has those (under pytest-xdist its workers have the items)."""
    untested: dict[str, list[str]] = {}
    for report in skipped_reports:
        if report.when != "setup" or not isinstance(report.longrepr, tuple):
            continue
        reason = report.longrepr[2].removeprefix("Skipped: ")
        if reason.startswith(SKIPPED_FOR_WANT_OF):
            for name in reason.removeprefix(SKIPPED_FOR_WANT_OF).split(", "):
                untested.setdefault(name, []).append(report.nodeid)
    return untested


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """Under CI the test fails (not errors) in place of its body."""
    missing = missing_for(item)
    if missing:
        pytest.fail(f"CI must test every protection, and this machine lacks {_said(missing)}", pytrace=False)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    untested = _untested(terminalreporter.stats.get("skipped", []))
    if not untested:
        return
    write = terminalreporter.write_line
    terminalreporter.section("PROTECTIONS NOT TESTED ON THIS MACHINE", sep="!", red=True, bold=True)
    for name, nodeids in untested.items():
        cap = CAPABILITIES[name]
        write(f"{name}: {cap.protects}", red=True, bold=True)
        write(f"    {len(nodeids)} test(s) skipped, e.g. {nodeids[0]}")
        write(f"    to test it: {cap.how}")
    write("These tests did not pass: they did not run. Under CI=true they fail instead.", red=True, bold=True)

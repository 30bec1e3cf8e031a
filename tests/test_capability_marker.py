"""`@pytest.mark.needs(...)` (tests/capability_marker.py): on a machine that really lacks a
namespace (a seccomp filter refuses them, as Docker's default profile does), a security test
fails under CI=true saying what is missing and how to provide it, and locally is skipped with
a loud end-of-session list of the protections that went untested."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent
NO_NAMESPACES = TESTS / "grader" / "no_namespaces.py"

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from capability_marker import (pytest_configure, pytest_runtest_call, pytest_runtest_setup,  # noqa: F401
                               pytest_terminal_summary)
"""

SECURITY_TESTS = """
import pytest

@pytest.mark.needs("pid_namespace")
def test_guarded(tmp_path_factory):
    open({ran!r}, "a").write("guarded ran\\n")

@pytest.mark.needs("process_cap")
def test_fork_cap():
    pass

def test_plain():
    pass
"""


def run_pytest(folder: Path, ci: bool, confined: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfs", str(folder)]
    if confined:
        cmd = [sys.executable, str(NO_NAMESPACES), *cmd]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def project(tmp_path: Path, body: str) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_security.py").write_text(textwrap.dedent(body))
    return folder


def test_under_ci_a_missing_namespace_fails_the_test_and_says_how_to_provide_it(tmp_path):
    ran = tmp_path / "ran.txt"
    done = run_pytest(project(tmp_path, SECURITY_TESTS.format(ran=str(ran))), ci=True)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert re.search(r"FAILED .*test_guarded", out), out
    assert "lacks pid_namespace (a kernel cannot signal the grader" in out
    assert "run the tests as root, or allow unprivileged user namespaces" in out
    assert not ran.exists()                                  # the test body never ran
    assert re.search(r"1 failed, 2 passed", out), out        # the others are untouched


def test_locally_a_missing_namespace_skips_and_the_session_ends_listing_it(tmp_path):
    ran = tmp_path / "ran.txt"
    done = run_pytest(project(tmp_path, SECURITY_TESTS.format(ran=str(ran))), ci=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert re.search(r"2 passed, 1 skipped", out), out
    summary = out.split("PROTECTIONS NOT TESTED ON THIS MACHINE", 1)[1]
    assert "pid_namespace: a kernel cannot signal the grader" in summary
    assert "test_security.py::test_guarded" in summary and "to test it: run the tests as root" in summary
    assert "process_cap" not in summary                      # root with a pids cgroup, or not root: present
    assert not ran.exists()


def test_with_every_capability_nothing_is_listed(tmp_path):
    """Unconfined on this machine (root, as CI is) the same tests run, and nothing is reported."""
    from grader.sandbox import capabilities
    ran = tmp_path / "ran.txt"
    done = run_pytest(project(tmp_path, SECURITY_TESTS.format(ran=str(ran))), ci=True, confined=False)
    out = done.stdout + done.stderr
    if not capabilities().pid:      # this machine itself lacks it: the marker must say so, as above
        assert done.returncode == 1 and "lacks pid_namespace" in out, out
        return
    assert done.returncode == 0 and "3 passed" in out, out
    assert "PROTECTIONS NOT TESTED" not in out and ran.read_text() == "guarded ran\n"


def test_a_misspelt_capability_is_an_error_not_a_skip(tmp_path):
    body = """
        import pytest

        @pytest.mark.needs("pid_namespce")
        def test_typo():
            pass
    """
    done = run_pytest(project(tmp_path, body), ci=False, confined=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "skipped" not in out, out
    assert "unknown capability 'pid_namespce'" in out and "known: pid_namespace" in out


def test_no_security_test_skips_quietly_on_a_capability():
    """Every capability check in the suite goes through the marker: no skipif on the sandbox's
    capabilities."""
    quiet = []
    for path in set(TESTS.rglob("test_*.py")) - {Path(__file__).resolve()}:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"skipif.*(CAPS|capabilities\(|geteuid)", line):
                quiet.append(f"{path.relative_to(TESTS)}:{number}")
    assert quiet == []

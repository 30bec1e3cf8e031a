"""An infrastructure fault is not a student's 0. The trusted process that runs a traced program
(grader.executor) runs no student code: killed by a signal that none of the job's own limits
sends (another program on the host, the host's OOM killer), it is the grader's failure, raised
as runner.ExecutorKilled (a GraderFault: a worker retries the run, then gives it up as a grader
error), never a test scored 0. What the job's limits do to it (the time budget, the memory
cap, the CPU limit, a cancel) stays what it was: that test's error. A signal in the tracing
child, which runs the student's code, stays the student's failure whoever sent it: a kernel
that kills itself must earn neither a retry nor a grader error.

Every kill here is a real signal to a real process, found in the process table under this
one; every wait on it is bounded (the kernel's program executes for about a minute, and the
kill comes as soon as its process is seen)."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from service_waits import wait_for

from executor_kills import LONG_KERNEL, executors_under, transpose_spec
from grader.errors import GraderFault
from grader.events import CancelToken
from grader.grade import GradeOptions, grade
from grader.runner import ExecutorKilled
from grader.sandbox import Limits
from grader.spec import parse
from grader.submission import Submission
from grader.zygote import ZYGOTE

# The same transpose writing a 1 GiB scratch tensor in device memory first: what its executor
# holds is far above a 512 MiB memory cgroup, while tracing it needs next to nothing.
HUNGRY_KERNEL = '''
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def matrix_transpose(a_tensor):
    M, N = a_tensor.shape
    out = nl.ndarray((N, M), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    scratch = nl.ndarray((128, 2 ** 21), dtype=nl.float32, buffer=nl.hbm)
    ones = nisa.memset(shape=(128, 16384), value=1.0, dtype=nl.float32)
    for i in nl.affine_range(128):
        nisa.dma_copy(dst=scratch[:, i * 16384:(i + 1) * 16384], src=ones)
    tile = nl.ndarray((128, 128), dtype=a_tensor.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=a_tensor[0:128, 0:128])
    nisa.dma_copy(dst=out[0:128, 0:128], src=nisa.tensor_copy(nisa.nc_transpose(tile)))
    return out
'''

# The student's own code ending its own process with SIGKILL while it is traced.
SELF_KILLING_KERNEL = '''
import os
import signal

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def matrix_transpose(a_tensor):
    os.kill(os.getpid(), signal.SIGKILL)
    return nl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=nl.shared_hbm)
'''

SPEC_TABLE = transpose_spec("infra-faults")
SPEC = parse(SPEC_TABLE)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SEEN_WITHIN_S = 120.0       # the executor starts a fraction of a second into the grade
GRADE_ENDS_WITHIN_S = 120.0  # after the kill (or the limit), the grade has nothing left to wait for


def submission(source: str) -> Submission:
    return Submission(files={"kernels": source}, filenames={"kernels": "kernels.py"},
                      sha256=hashlib.sha256(source.encode()).hexdigest(), origin="kernels.py")


def options(**kw) -> GradeOptions:
    kw.setdefault("limits", Limits(wall_seconds=300))
    return GradeOptions(backend="sim", seed=1, run_precheck=False, **kw)


def running_executor(future):
    """Wait (bounded) until the grade's executor runs below this process; fail at once, with
    the report, should the grade end first."""
    def seen():
        if future.done():
            report = future.result()
            raise AssertionError(f"the grade ended before its executor was seen: "
                                 f"{[(t.name, t.status, t.message) for t in report.tests]}")
        return executors_under(os.getpid())
    return wait_for(seen, SEEN_WITHIN_S, "the grade's executor to start", interval=0.05)[0]


def kill_executor(future, which: str = "executor") -> int:
    """SIGKILL, from this process (another program as far as the grade can tell), the grade's
    executor once it runs, or the fork server's monitor that waits for it, or the fork server
    itself (grader.zygote: each of them takes the executor down with it). The pid killed."""
    proc = running_executor(future)
    if which == "executor":
        pid = proc.pid
    else:
        monitor = proc.parent()
        assert monitor.pid != os.getpid() and monitor.ppid() == ZYGOTE.pid, "the executor did not come from the fork server"
        pid = monitor.pid if which == "monitor" else ZYGOTE.pid
    os.kill(pid, signal.SIGKILL)
    return pid


def grading(source: str, opts: GradeOptions):
    """The grade on a thread of its own (this thread stays free to kill its processes)."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(grade, submission(source), SPEC, opts)
    pool.shutdown(wait=False)
    return future


def only_test(report):
    (test,) = report.tests
    return test


@pytest.mark.parametrize("which", ["executor", "monitor", "fork server"])
def test_an_executor_killed_from_outside_is_a_grader_fault_not_a_zero(which):
    future = grading(LONG_KERNEL, options())
    kill_executor(future, which)
    with pytest.raises(ExecutorKilled) as raised:
        future.result(timeout=GRADE_ENDS_WITHIN_S)
    fault = raised.value
    assert isinstance(fault, GraderFault)            # what a worker retries; never a report with a 0
    assert fault.signal == signal.SIGKILL
    text = str(fault)
    assert "killed by signal 9 (SIGKILL)" in text and "grader.executor" in text, text
    assert "the grader's fault, not the kernel's" in text and "matrix_transpose" in text, text
    assert wait_for(lambda: not executors_under(os.getpid()), SEEN_WITHIN_S, "the executor to be gone")


def test_the_grader_grades_honestly_after_a_killed_executor():
    future = grading(LONG_KERNEL, options())
    kill_executor(future)
    with pytest.raises(ExecutorKilled):
        future.result(timeout=GRADE_ENDS_WITHIN_S)
    honest = (ROOT / "reference_kernels" / "transpose.py").read_text()
    report = grade(submission(honest), SPEC, options())
    assert only_test(report).status == "passed" and report.score.total == 3


def test_an_executor_stopped_by_the_time_budget_stays_that_tests_timeout():
    # tracing takes about a second of the 10; the executor is stopped at the budget's end
    report = grade(submission(LONG_KERNEL), SPEC, options(time_budget_s=10))
    test = only_test(report)
    assert test.status == "error" and test.points == 0 and report.score.total == 0
    assert "time budget ran out" in test.message, test.message


def test_an_executor_stopped_by_its_cpu_limit_stays_that_tests_error():
    # RLIMIT_CPU with soft = hard: the kernel sends SIGKILL, not SIGXCPU, at the limit
    # tracing spends about a second of the 8; executing would spend a minute
    report = grade(submission(LONG_KERNEL), SPEC, options(limits=Limits(wall_seconds=300, cpu_seconds=8)))
    test = only_test(report)
    assert test.status == "error" and test.points == 0
    assert "running the kernel's program used up its CPU time limit (8 s of CPU)" in test.message, test.message


@pytest.mark.needs("memory_cgroup")
def test_an_executor_killed_by_the_memory_cap_stays_that_tests_error():
    limits = Limits(wall_seconds=300, resident_bytes=512 * 2**20)
    report = grade(submission(HUNGRY_KERNEL), SPEC, options(limits=limits))
    test = only_test(report)
    assert test.status == "error" and test.points == 0
    assert "needs more memory than the grader allows" in test.message, test.message


def test_an_executor_cancelled_stays_a_cancelled_grade():
    token = CancelToken()
    future = grading(LONG_KERNEL, options(cancel=token))
    running_executor(future)
    token.cancel()
    report = future.result(timeout=GRADE_ENDS_WITHIN_S)
    assert report.status == "cancelled"
    assert report.score.total == 0


def graded_without_namespaces(source: str) -> dict:
    """The grade of `source` in a process where namespaces are refused (no_namespaces.py, the
    Gradescope fallback): the tracing child is then an ordinary process, which its own SIGKILL
    ends. (In a PID namespace it is the namespace's first process, which ignores a SIGKILL sent
    from inside the namespace: the kernel then goes on and fails by itself.)"""
    code = textwrap.dedent("""
        import json, sys
        import test_infra_faults as t
        try:
            report = t.grade(t.submission(sys.stdin.read()), t.SPEC, t.options())
        except Exception as err:
            print(json.dumps({"raised": type(err).__name__, "message": str(err)}))
        else:
            test = t.only_test(report)
            print(json.dumps({"status": test.status, "points": test.points, "message": test.message}))
        """)
    path = os.pathsep.join(str(p) for p in (ROOT, HERE, ROOT / "tests"))      # the repository's nkisim first
    done = subprocess.run([sys.executable, str(HERE / "no_namespaces.py"), sys.executable, "-c", code], input=source,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=path), cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_kernel_that_kills_itself_is_the_students_failure_not_a_grader_fault():
    report = grade(submission(SELF_KILLING_KERNEL), SPEC, options())     # whatever the isolation level here
    test = only_test(report)
    assert test.status == "error" and test.points == 0 and report.score.total == 0
    fallback = graded_without_namespaces(SELF_KILLING_KERNEL)             # where the signal surely ends it
    assert "raised" not in fallback, fallback
    assert fallback["status"] == "error" and fallback["points"] == 0
    assert "the kernel's process died (signal 9)" in fallback["message"], fallback


def test_a_tracing_child_killed_from_outside_stays_the_students_failure():
    """The tracing child runs the student's code: from the grader's side a SIGKILL another
    program sent and one the kernel sent itself look the same, so neither is a grader fault."""
    spin = LONG_KERNEL.replace("    M, N = a_tensor.shape\n", "    M, N = a_tensor.shape\n    while True:\n        pass\n")
    future = grading(spin, options())

    def tracing_child():
        for proc in psutil.Process().children(recursive=True):
            try:
                if os.path.basename(os.path.dirname(proc.cwd())).startswith("trace-"):
                    return proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return None
    child = wait_for(tracing_child, SEEN_WITHIN_S, "the tracing child to start", interval=0.05)
    os.kill(child.pid, signal.SIGKILL)
    report = future.result(timeout=GRADE_ENDS_WITHIN_S)
    test = only_test(report)
    assert test.status == "error" and test.points == 0
    assert "died (signal 9)" in test.message, test.message


def test_grader_grade_says_the_grader_failed_and_exits_4(tmp_path, capsys):
    """The command line: no traceback and no report, the grader's failure named as such, exit
    status 4 (grader/cli.py's EXIT_GRADER_FAULT)."""
    import tomlkit
    from grader import cli
    spec = tmp_path / "infra.toml"
    spec.write_text(tomlkit.dumps(SPEC_TABLE))
    kernel = tmp_path / "kernels.py"
    kernel.write_text(LONG_KERNEL)
    report = tmp_path / "report.json"
    pool = ThreadPoolExecutor(max_workers=1)         # main() off the main thread sets no signal handlers
    future = pool.submit(cli.main, ["grade", str(kernel), "--assignment", str(spec), "--backend", "sim",
                                    "--seed", "1", "--no-precheck", "--json", str(report)])
    pool.shutdown(wait=False)
    kill_executor(future)
    assert future.result(timeout=GRADE_ENDS_WITHIN_S) == cli.EXIT_GRADER_FAULT
    err = capsys.readouterr().err
    assert "grader: the grader failed, not the submission:" in err and "killed by signal 9 (SIGKILL)" in err
    assert "Traceback" not in err and not report.exists()

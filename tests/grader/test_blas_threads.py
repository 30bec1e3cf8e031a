"""Answers do not depend on the BLAS threads of the process that works them out: the grader's
process runs BLAS on one thread while any answer is being made (grader/blas.py), whoever made
it (a grade, an answer pool filled at a worker's start, the downgrade check), and threads that
start and stop answers in any order never hand another one a BLAS of several threads."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from grader import downgrade, problems
from grader.inputs import config_inputs, config_seed

CONFIG = dict(batch=1, c_in=128, c_out=128, height=10, width=10, k=3, bias=True, pool=1, dtype="float32")


def blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.mark.parametrize("threads", [1, 2])
def test_an_answer_is_the_same_whatever_blas_threads_the_caller_left(threads):
    args, kwargs = config_inputs("conv2d", CONFIG, config_seed(7, 0, 0))
    with threadpool_limits(limits=1, user_api="blas"):
        one = problems.reference("conv2d", args, kwargs, threads=threads)
        low_one = downgrade.lower_answers("conv2d", args, kwargs, one.dtype, np.random.default_rng(3))
    for many in (2, 3):
        with threadpool_limits(limits=many, user_api="blas"):
            again = problems.reference("conv2d", args, kwargs, threads=threads)
            low_again = downgrade.lower_answers("conv2d", args, kwargs, one.dtype, np.random.default_rng(3))
            assert blas_threads() == {many}        # left as the caller set it
        assert np.array_equal(again, one), f"{many} BLAS threads changed the answer"
        assert np.array_equal(low_again[0], low_one[0])
        assert all(np.array_equal(low_again[1][name], low_one[1][name]) for name in low_one[1])


WORKER_PROCESS = """
import sys, threading
import numpy as np
from grader import problems, use_one_blas_thread
from grader.blas import one_blas_thread
from grader.inputs import config_inputs, config_seed
if sys.argv[1] == "for-good":
    use_one_blas_thread()              # what a worker's processes do first
args, kwargs = config_inputs("conv2d", CONFIG, config_seed(7, 0, 0))
with one_blas_thread():                # a grade on the main thread came and went
    one = problems.reference("conv2d", args, kwargs)
made = {}
# the pool topped up on a thread of its own, after that grade
thread = threading.Thread(target=lambda: made.setdefault("answer", problems.reference("conv2d", args, kwargs)))
thread.start()
thread.join()
print("same" if np.array_equal(made["answer"], one) else "differs")
"""


def test_a_workers_answers_made_on_a_thread_after_a_grade_are_the_grades_bits():
    """OpenBLAS (0.3.31, pthreads) does not always take a thread count set on a thread other
    than the main one once the main thread has set one (as a grade does when it ends): a worker
    process therefore sets one BLAS thread for good on its main thread (grader.use_one_blas_thread)."""
    script = f"CONFIG = {CONFIG!r}\n" + WORKER_PROCESS
    done = subprocess.run([sys.executable, "-c", script, "for-good"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["same"]

"""A grade's big buffers are given back to the system when freed, whichever thread freed them
(grader.malloc): glibc would otherwise keep buffers of tens of MB resident in its arenas once it
had freed a larger one."""
from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAM = """
import sys, threading
import numpy as np
from grader import malloc
if sys.argv[1] == "fixed":
    assert malloc.return_big_buffers()

def rss_mb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20

def churn():
    a = np.ones(30 << 20, dtype=np.uint8); del a      # freeing it raises glibc's threshold
    b = np.ones(20 << 20, dtype=np.uint8); del b      # then this one stays in the arena
before = rss_mb()
worker = threading.Thread(target=churn); worker.start(); worker.join()
print(rss_mb() - before)
"""


def kept_mb(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_freed_buffer_of_tens_of_mb_leaves_nothing_resident():
    assert kept_mb("default") > 15          # the attack on memory: without the fix 20 MB stay
    assert kept_mb("fixed") < 5

"""An honest kernel of a million small instructions graded end to end (issue 17: size is not
suspicion): prints its grade, flags, wall time, the program's encoded size and the grader's
peak resident memory.

The kernel is the reference conv2d followed by COUNT tiny tensor_scalar instructions on a
scratch tile (correct and slow). The program's size is measured by tracing it in a separate
process, so that the grader's peak RSS (this process, ru_maxrss) is the grading's alone.

    python bench/many_instructions.py [--count 1000000]

Measured (2-core box, shared): 1000149 instructions, 25.8 MiB encoded; conv passed, perf/ec
failed on speed (p99 133376 us), flags none, wall 567 s, grader peak RSS 135 MiB. Before the
encoding shared equal regions (commit 40c717f^): 410.9 MiB encoded, program_invalid:conv, grader
peak RSS 876 MiB.
"""
from __future__ import annotations

import argparse
import hashlib
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "grader"))

from test_redteam_program import many_small_instructions  # noqa: E402

SIZE_PROBE = """
import sys
import numpy as np
import nkisim
nkisim.install()
from nkisim import program as programs
from nkisim.runtime import ArgSpec, trace_kernel
namespace = {}
exec(compile(sys.stdin.read(), "conv2d.py", "exec"), namespace)
args = [ArgSpec((1, 128, 10, 10), np.dtype(np.float32)), ArgSpec((128, 128, 3, 3), np.dtype(np.float32)),
        ArgSpec((128,), np.dtype(np.float32))]
program, _ = trace_kernel(namespace["fused_conv2d_maxpool"], args, {"pool_size": 1})
print(len(program.records), len(programs.encode(program)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    count = parser.parse_args().count
    source = many_small_instructions(count)

    probe = subprocess.run([sys.executable, "-c", SIZE_PROBE], input=source, text=True, capture_output=True,
                           check=True, cwd=ROOT)
    instructions, size = map(int, probe.stdout.split())
    print(f"program: {instructions} instructions, {size / 2**20:.1f} MiB encoded")

    from test_hostile import SPEC, by_name  # noqa: E402  (the hostile suite's small conv2d spec)

    from grader.grade import GradeOptions, grade
    from grader.sandbox import Limits
    from grader.submission import Submission
    sub = Submission(files={"conv2d": source}, filenames={"conv2d": "conv2d.py"},
                     sha256=hashlib.sha256(source.encode()).hexdigest(), origin="conv2d.py")
    start = time.monotonic()
    report = grade(sub, SPEC, GradeOptions(backend="sim", run_precheck=False,
                                           limits=Limits(wall_seconds=3600, cpu_seconds=7200)))
    wall = time.monotonic() - start
    for name, test in by_name(report).items():
        print(f"{name:5s} {test.status:8s} {test.points:6.2f}  {test.message[:400]}")
    print(f"score {report.score.total}/{report.score.max_total}  flags {report.flags or 'none'}  wall {wall:.0f} s")
    print(f"grader peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()

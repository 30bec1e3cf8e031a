"""What a fresh Python pays before it does anything: prints figures, asserts nothing.

Every process the system starts without the zygote pays its imports: the `grader` CLI, each
Celery worker and beat, the web site's workers, Gradescope's run_autograder, and the zygote
itself once per grader. For each module below, the CPU time (user + system) of
`python -I -c "import MODULE"`, best of --rounds, against NumPy's own import measured the same
way in the same run:

    ratio = CPU(import MODULE) / CPU(import numpy)

ml_dtypes 0.7.0 took 1.3 s of CPU to import where 0.6.0 takes 0.15 s (NumPy's ufunc loop
registration, PyUFunc_AddLoop, found with `perf record`): nkisim's ratio went from about 1.5
to about 10, and every process above paid it. pyproject.toml keeps ml_dtypes below 0.7; a
ratio well above 2 for nkisim means a dependency's import grew again. Run from the repository
root:

    python bench/startup.py [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib import metadata

MODULES = ("ml_dtypes", "nkisim", "grader.cli", "service.cli", "workers.tasks", "web")


def import_cpu(module: str) -> float:
    """CPU seconds of a fresh isolated interpreter importing `module` (its children's included)."""
    before = os.times()
    subprocess.run([sys.executable, "-I", "-c", f"import {module}"], check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def best(module: str, rounds: int) -> float:
    return min(import_cpu(module) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs per module; the best counts (default 5)")
    args = parser.parse_args()
    print(f"numpy {metadata.version('numpy')}, ml_dtypes {metadata.version('ml_dtypes')}, "
          f"Python {sys.version.split()[0]}")
    base = best("numpy", args.rounds)
    print(f"{'import':<16}{'CPU s':>8}{'x numpy':>9}")
    print(f"{'numpy':<16}{base:>8.3f}{1.0:>9.2f}")
    for module in MODULES:
        cpu = best(module, args.rounds)
        print(f"{module:<16}{cpu:>8.3f}{cpu / base:>9.2f}")


if __name__ == "__main__":
    main()

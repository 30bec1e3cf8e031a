"""What the trace/execute split costs a whole grade: the same submission graded with the CLI by
this tree and by the tree before the split (a git worktree of --baseline, default the last commit
before it), alternating, with the same public seed and backend. Prints each round's wall time
and the ratio of the best of each; asserts nothing.

    python bench/split_speed.py [--rounds 2] [--baseline 38adc3f] [--submission reference_kernels/conv2d_optimized.py]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def baseline_python(tree: Path, where: Path) -> str:
    """An interpreter that imports the baseline tree first and this venv's packages after it,
    in every process it starts (children run `python -I`, which ignores PYTHONPATH but not .pth
    files of its own site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next(where.glob("lib/python*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    (site / "baseline.pth").write_text(f"{tree}\n{ours}\n")
    return str(where / "bin" / "python")


def grade_once(python: str, tree: Path, submission: Path, workdir: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([python, "-c", "import sys; from grader.cli import main; sys.exit(main())",
                           "grade", str(submission), "--seed", "0", "--backend", "sim"],
                          cwd=workdir, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"grading with {tree} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    total = [line for line in done.stdout.splitlines() if line.startswith("Total")]
    print(f"  {tree.name:12} {wall:7.2f} s   {total[0] if total else ''}", flush=True)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", default="38adc3f", help="commit before the split")
    parser.add_argument("--submission", default=str(ROOT / "reference_kernels" / "conv2d_optimized.py"))
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="split-speed-"))
    baseline = scratch / "baseline"
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), args.baseline],
                       check=True, capture_output=True)
        submission = scratch / "conv2d.py"
        shutil.copy(args.submission, submission)
        old_python = baseline_python(baseline, scratch / "venv")
        best = {"baseline": float("inf"), "current": float("inf")}
        for r in range(args.rounds):
            print(f"round {r + 1}")
            best["baseline"] = min(best["baseline"], grade_once(old_python, baseline, submission, scratch))
            best["current"] = min(best["current"], grade_once(sys.executable, ROOT, submission, scratch))
        ratio = best["current"] / best["baseline"]
        print(f"best whole grade: before the split {best['baseline']:.2f} s, now {best['current']:.2f} s, "
              f"ratio {ratio:.3f} (target <= 1.10)")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

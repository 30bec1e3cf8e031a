"""Does local mode fit Gradescope's container? Builds the autograder zip, installs it with
setup.sh into a fresh root (as Gradescope does), then runs run_autograder on an honest full
submission pinned to one CPU (taskset) inside a memory cgroup of its own, and prints its wall
time and the cgroup's peak memory (the whole process tree, shared memory included, which is
what Gradescope's container limit counts) beside Gradescope's defaults (half a CPU, 768 MB,
10 minutes). Asserts nothing; the figures go into grader/gradescope/fit.py and docs/gradescope.md.

    python bench/gradescope_fit.py [--assignment asst4-trainium2] [--submission asst4.tar.gz]
                                   [--cpu 0] [--no-namespaces]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NO_NAMESPACES = REPO / "tests" / "grader" / "no_namespaces.py"


def honest_archive() -> bytes:
    """asst4.tar.gz of the optimized reference kernels (both parts)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, source in (("part2/conv2d.py", "conv2d_optimized.py"), ("part1/kernels.py", "transpose.py")):
            data = (REPO / "reference_kernels" / source).read_bytes()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def system_python() -> str:
    for candidate in ("/usr/bin/python3.13", "/usr/bin/python3.12", "/usr/bin/python3.11", "/usr/bin/python3"):
        if os.path.exists(candidate):
            return candidate
    return sys.executable


def memory_cgroup() -> tuple[Path, str]:
    """A fresh memory cgroup below ours, and the name of its peak-usage file (v2 or v1)."""
    from grader import sandbox
    parent = sandbox._cgroup_parent("memory", "memory.max", "memory.limit_in_bytes")
    if not parent:
        raise SystemExit("no writable memory cgroup here (run as root on a machine with the memory controller)")
    path = Path(parent, f"nki-gradescope-fit-{uuid.uuid4().hex[:8]}")
    path.mkdir()
    peak = "memory.peak" if (path / "memory.peak").exists() else "memory.max_usage_in_bytes"
    return path, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="asst4-trainium2")
    parser.add_argument("--submission", help="default: asst4.tar.gz of the optimized reference kernels")
    parser.add_argument("--cpu", type=int, default=0, help="the one CPU to pin to (default 0)")
    parser.add_argument("--no-namespaces", action="store_true",
                        help="as in a container that refuses namespaces (the uid + seccomp fallback)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nki-gradescope-fit-", dir="/tmp"))
    os.chmod(root, 0o755)
    cgroup = None
    try:
        zip_path = root / "autograder.zip"
        built = subprocess.run([sys.executable, "-m", "grader.cli", "gradescope", "build", "--assignment",
                                args.assignment, "--mode", "local", "-o", str(zip_path)],
                               cwd=REPO, capture_output=True, text=True, check=True)
        print(built.stdout.strip())
        (root / "source").mkdir()
        with zipfile.ZipFile(zip_path) as zf:
            zf.extractall(root / "source")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NKI_", "PYTHON"))}
        env["NKI_GRADESCOPE_ROOT"] = str(root)
        subprocess.run(["bash", "setup.sh"], cwd=root / "source", env=dict(env, NKI_GRADESCOPE_PYTHON=system_python()),
                       check=True, capture_output=True)
        shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
        os.chmod(root / "run_autograder", 0o755)
        (root / "submission").mkdir()
        if args.submission:
            shutil.copy(args.submission, root / "submission" / Path(args.submission).name)
        else:
            (root / "submission" / "asst4.tar.gz").write_bytes(honest_archive())
        cgroup, peak_file = memory_cgroup()
        command = ["taskset", "-c", str(args.cpu), str(root / "run_autograder")]
        if args.no_namespaces:
            command = ["taskset", "-c", str(args.cpu), sys.executable, str(NO_NAMESPACES), str(root / "run_autograder")]
        start = time.monotonic()
        done = subprocess.run(["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", *command],
                              cwd=root, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        peak_mb = int((cgroup / peak_file).read_text()) / 2**20
        results = json.loads((root / "results" / "results.json").read_text())
        print(f"run_autograder exit {done.returncode}; score {results.get('score')}; isolation "
              f"{results.get('extra_data', {}).get('isolation', {}).get('level')}")
        print(f"one CPU (taskset -c {args.cpu}): wall {wall:.0f} s; peak memory {peak_mb:.0f} MB ({peak_file}, "
              f"whole process tree)")
        print(f"Gradescope defaults: half a CPU (about {2 * wall:.0f} s at this rate), 768 MB, 10 min timeout")
        print(f'fit.MEASURED entry: "{_spec_hash(root)}": {{"peak_mb": {peak_mb:.0f}, "one_cpu_s": {wall:.0f}}}')
    finally:
        if cgroup is not None:
            try:
                cgroup.rmdir()
            except OSError:
                pass
        shutil.rmtree(root, ignore_errors=True)


def _spec_hash(root: Path) -> str:
    import hashlib
    return hashlib.sha256((root / "source" / "spec.toml").read_bytes()).hexdigest()


if __name__ == "__main__":
    main()

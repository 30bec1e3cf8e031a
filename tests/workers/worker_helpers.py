"""Constants and submissions the worker tests share (a module of its own: `conftest` is not a
unique name to import from)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY_SPEC = ROOT / "tests" / "workers" / "specs" / "tiny.toml"
OPTIMIZED = (ROOT / "reference_kernels" / "conv2d_optimized.py").read_bytes()


def spinning_kernel() -> bytes:
    """Passes every static check, then never returns."""
    return (b"import neuronxcc.nki as nki\n\n\n@nki.jit\ndef fused_conv2d_maxpool(X, W, bias, pool_size=1):\n"
            b"    n = 0\n    while True:\n        n += 1\n")


def finished_task(db, task_id: int, timeout: float, what: str):
    """The staff task's row once a worker has done it (or failed it)."""
    from service_waits import wait_for
    from store.models import StaffTask

    def finished():
        db.expire_all()
        row = db.get(StaffTask, task_id)
        return row if row.status in ("done", "failed") else None
    return wait_for(finished, timeout, what)

"""pytest fixtures of the SDK doubles: `from fixtures import sdk` in a test module.

`sdk` builds the environments of both SDK lines once per module (tests/doubles/sdk_envs.py),
under /var/tmp: the sandbox covers /tmp with a private tmpfs, which would hide them."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import sdk_envs

DRIVER = Path(__file__).resolve().parent / "grade_driver.py"


@pytest.fixture(scope="module")
def sdk():
    root = Path(tempfile.mkdtemp(prefix="nki-sdk-doubles-", dir="/var/tmp"))
    try:
        yield sdk_envs.build(root / "sdk")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def grade_on(envs: "sdk_envs.SdkEnvs", line: str, spec: dict, source: bytes, tmp_path: Path, **options) -> dict:
    """Grade `source` against `spec` on a Trn2 worker of `line`, as that worker's Python would:
    the report as JSON. Options: GradeOptions fields (backend defaults to neuron)."""
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    (tmp_path / "conv2d.py").write_bytes(source)
    (tmp_path / "options.json").write_text(json.dumps({"backend": "neuron", **options}))
    done = subprocess.run([str(envs.python(line)), "-I", str(DRIVER), str(tmp_path)], capture_output=True,
                          text=True, env=sdk_envs.run_env(envs.settings(line)), timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)

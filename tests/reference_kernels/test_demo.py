"""`nkisim demo`: composed by reference_kernels.demo (nkisim itself knows no kernels)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_nkisim_script_runs_every_reference_kernel_against_numpy():
    done = subprocess.run([str(Path(sys.executable).parent / "nkisim"), "demo"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all reference kernels match NumPy" in done.stdout
    assert "conv2d optimized 32x16 pool=2" in done.stdout and "WRONG" not in done.stdout


def test_the_simulator_alone_has_no_demo_to_run(capsys):
    from nkisim.cli import main
    with pytest.raises(SystemExit):
        main(["demo"])
    assert "invalid choice: 'demo'" in capsys.readouterr().err

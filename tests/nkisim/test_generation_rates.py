"""bench/generation_rates.py: each generation's peak rates measured by micro-kernels on its model
and set against the documented figures."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rates(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "generation_rates.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_every_generation_gets_a_table_naming_its_model():
    done = rates()
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("documented rates within 5%") == 3
    for line in ("Trainium1 (NeuronCore-v2) model, platform trn1: calibrated on",
                 "Trainium2 (NeuronCore-v3) model, platform trn2: calibrated on",
                 "Trainium3 (NeuronCore-v4) model, platform trn3: NOT calibrated against Trainium3 hardware"):
        assert line in done.stdout
    assert re.search(r"measured in [\d.]+ s", done.stdout)      # the bench says how long it took


def test_each_generation_has_the_instructions_it_has():
    trn1, trn3 = rates("--platform", "trn1").stdout, rates("--platform", "trn3").stdout
    assert "nc_matmul_mx" not in trn1 and "double_row" not in trn1      # NC-v2: neither exists
    mx = next(line for line in trn3.splitlines() if "PE nc_matmul_mx mxfp8" in line)
    model, documented, ratio = (float(v) for v in mx.split()[4:7])
    assert documented == 315 and abs(model / documented - ratio) < 1e-3
    assert re.search(r"PE nc_matmul fp8 double_row\s+TFLOPS\s+refused", trn3)    # not simulated: said so

"""The README's test command on a machine without Debian's chromium: it says so at once, with
the command that installs it, instead of failing the browser tests ten minutes in."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_without_chromium_the_suite_stops_at_once_and_says_how_to_get_it(tmp_path):
    env = dict(os.environ, NKI_TEST_CHROMIUM=str(tmp_path / "no-chromium-here"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           "tests/web/test_browser.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 4, said
    assert "sudo apt-get install -y chromium" in said and "--deselect tests/web/test_browser.py" in said


def test_the_fast_subset_needs_no_chromium(tmp_path):
    """`-m "not slow"` leaves the browser tests out, so a machine without chromium runs it."""
    env = dict(os.environ, NKI_TEST_CHROMIUM=str(tmp_path / "no-chromium-here"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           "-m", "not slow", "tests/web/test_browser.py", "tests/test_docs.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "tests/test_docs.py::" in said and "test_browser.py::" not in said

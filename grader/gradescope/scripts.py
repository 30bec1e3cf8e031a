"""setup.sh and run_autograder, as they go into the zip. Both honour NKI_GRADESCOPE_ROOT
(default /autograder), so tests and instructors can try the zip outside Gradescope."""

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, from /autograder/source, when it builds the autograder's
# image: it installs the grader (the wheel beside this file) and its pinned dependencies into
# a virtual environment at $ROOT/nki-venv, outside source/ (which becomes root-only).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${NKI_GRADESCOPE_ROOT:-/autograder}"
VENV="$ROOT/nki-venv"

pick_python() {
    for candidate in ${NKI_GRADESCOPE_PYTHON:-} python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
           "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    if [ -z "${APT_UPDATED:-}" ]; then apt-get update -q; APT_UPDATED=1; fi
    apt-get install -y -q --no-install-recommends "$@"
}

PY="$(pick_python || true)"
if [ -z "$PY" ]; then
    echo "setup.sh: no Python 3.11+ with venv; installing one with apt"
    apt_install python3.11 python3.11-venv || apt_install python3 python3-venv || true
    PY="$(pick_python || true)"
fi
if [ -z "$PY" ]; then
    echo "setup.sh: cannot find or install Python 3.11 or newer; choose Gradescope's Ubuntu 22.04 or 24.04 base image" >&2
    exit 1
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
    apt_install libseccomp2 || echo "setup.sh: libseccomp2 unavailable: without namespaces, no system-call filter"
fi

echo "setup.sh: $("$PY" --version) at $PY; installing into $VENV"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$HERE/requirements.txt"
"$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q --no-deps "$HERE"/wheels/*.whl
# `grader gradescope check results.json` for staff in this image; grading never needs it
"$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q "jsonschema>=4.20,<5" ||
    echo "setup.sh: jsonschema could not be installed: grading works, \`grader gradescope check\` does not"
# a student's process (another uid) must read the interpreter's packages; source/ stays root's
chmod -R a+rX "$VENV"
chmod a+x "$ROOT"
"$VENV/bin/python" -I -c "import grader.grade, grader.gradescope.run, nkisim; print('setup.sh: grader installed')"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope copies this to /autograder/run_autograder and runs it, as root, from /autograder,
# once per submission. The grader writes results/results.json whatever happens.
ROOT="${NKI_GRADESCOPE_ROOT:-/autograder}"
cd "$ROOT" || exit 1
if [ ! -x "$ROOT/nki-venv/bin/python" ]; then
    mkdir -p "$ROOT/results"
    printf '%s\n' '{"score": 0, "output": "**Autograder error: this was not caused by your submission.** The grader is not installed in this image (setup.sh failed). Tell course staff: they must look at the autograder build log on Gradescope and upload the zip again.", "output_format": "md", "extra_data": {"autograder_error": true}, "tests": []}' > "$ROOT/results/results.json"
    exit 0
fi
exec "$ROOT/nki-venv/bin/python" -I -m grader.gradescope.run
"""

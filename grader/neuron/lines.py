"""Which Neuron SDK line this machine grades with, and what is missing when it cannot.

Two lines do not overlap (shared/docs/neuron-runtime.md):
- legacy: SDK 2.26 (the course's): kernels import `neuronxcc.nki`; the child compiles with
  `nki.baremetal(kernel, save_neff_name=...)`; outputs come back through libnrt and device
  time from `neuron-profile capture`/`view` (aws-neuronx-tools).
- current: SDK 2.28+, the standalone `nki` 0.2+ wheel: the child compiles with
  `NKI_ARTIFACTS_DIR` set before nki is imported; a separate nrtpy interpreter
  (GRADER_NRTPY_PYTHON) runs and times the NEFF (`benchmark(mode="device")`).

Settings (environment): GRADER_LIBNRT (default /opt/aws/neuron/lib/libnrt.so.1),
GRADER_NEURON_TOOLS (default /opt/aws/neuron/bin, where aws-neuronx-tools installs
neuron-profile), GRADER_NRTPY_PYTHON (current line: the nrtpy environment's python).
"""
from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from dataclasses import asdict, dataclass

from ..errors import GraderInputError

DEFAULT_LIBNRT = "/opt/aws/neuron/lib/libnrt.so.1"
DEFAULT_TOOLS = "/opt/aws/neuron/bin"


class NeuronUnavailable(GraderInputError):
    """This machine cannot grade on a NeuronCore; the message names what is missing."""


@dataclass(frozen=True)
class NeuronSetup:
    line: str                    # "legacy" | "current"
    sdk: str                     # what compiles, with its version
    cores: int                   # NeuronCores on the instance (libnrt)
    libnrt: str
    tools: str
    nrtpy_python: str | None     # current line only

    def job_fields(self) -> dict:
        return asdict(self)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _nki_is_current(version: str | None) -> bool:
    try:
        major, minor = (int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (0, 2)


def _device(libnrt: str) -> int:
    from . import libnrt as nrt
    try:
        cores = nrt.total_cores(libnrt)
    except OSError:
        if not glob.glob("/dev/neuron*"):
            raise NeuronUnavailable(
                f"no Neuron device: /dev/neuron* is absent and there is no Neuron runtime at {libnrt}",
                "Run on a Trn2 instance with the Neuron driver and runtime (aws-neuronx-dkms, "
                "aws-neuronx-runtime-lib), or grade with --backend sim.") from None
        raise NeuronUnavailable(f"Neuron runtime missing: cannot load {libnrt}",
                                "Install aws-neuronx-runtime-lib, or set GRADER_LIBNRT to libnrt.so.1.") from None
    except nrt.NrtError as err:
        raise NeuronUnavailable(f"no Neuron device: the Neuron runtime sees none ({err})",
                                "Check the Neuron driver (aws-neuronx-dkms) and the devices passed to this "
                                "container (/dev/neuron*).") from None
    if cores < 1:
        raise NeuronUnavailable("no Neuron device: the Neuron runtime sees no NeuronCore",
                                "Check the Neuron driver and the devices passed to this container (/dev/neuron*).")
    return cores


def _nrtpy(environ) -> str:
    python = environ.get("GRADER_NRTPY_PYTHON", "")
    if not python:
        raise NeuronUnavailable("interpreter missing: the current SDK line (nki 0.2+) runs NEFFs in a separate "
                                "nrtpy interpreter and GRADER_NRTPY_PYTHON is not set",
                                "Create a venv with `pip install nrtpy --extra-index-url="
                                "https://pip.repos.neuron.amazonaws.com` and set GRADER_NRTPY_PYTHON to its python.")
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise NeuronUnavailable(f"interpreter missing: GRADER_NRTPY_PYTHON={python} is not an executable",
                                "Point GRADER_NRTPY_PYTHON at the nrtpy environment's bin/python.")
    probe = subprocess.run([python, "-I", "-c", "import nrtpy, numpy"], capture_output=True, text=True,
                           errors="replace", stdin=subprocess.DEVNULL)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise NeuronUnavailable(f"interpreter missing: {python} cannot import nrtpy ({last})",
                                "Install nrtpy (and only nrtpy, never the nki wheel) in that environment.")
    return python


def detect(environ=None) -> NeuronSetup:
    """The machine's Neuron setup, checked in the order a TA fixes it: device, SDK, tools,
    interpreter. Raises NeuronUnavailable naming the first thing missing."""
    environ = os.environ if environ is None else environ
    libnrt = environ.get("GRADER_LIBNRT") or DEFAULT_LIBNRT
    tools = environ.get("GRADER_NEURON_TOOLS") or DEFAULT_TOOLS
    cores = _device(libnrt)
    nki_version = _version("nki") if _importable("nki") else None
    if _nki_is_current(nki_version):
        return NeuronSetup("current", f"nki {nki_version}", cores, libnrt, tools, _nrtpy(environ))
    if _importable("neuronxcc") and _importable("neuronxcc.nki"):
        profile = os.path.join(tools, "neuron-profile")
        if not (os.path.isfile(profile) and os.access(profile, os.X_OK)):
            raise NeuronUnavailable(f"tools missing: {profile} (aws-neuronx-tools) times NEFFs on the SDK 2.26 line",
                                    "Install aws-neuronx-tools, or set GRADER_NEURON_TOOLS to the folder holding "
                                    "neuron-profile.")
        return NeuronSetup("legacy", f"neuronx-cc {_version('neuronx-cc') or '(version unknown)'}", cores, libnrt,
                           tools, None)
    raise NeuronUnavailable(f"Neuron SDK missing: this Python ({sys.executable}) imports neither neuronxcc.nki "
                            f"(SDK 2.26) nor the nki 0.2+ wheel (SDK 2.28+)" +
                            (f"; nki {nki_version} is older than 0.2" if nki_version else ""),
                            "Install the grader into the Neuron SDK's Python environment (the one with "
                            "neuronx-cc, or with the nki wheel).")

"""Which Neuron SDK line this machine grades with, and what is missing when it cannot.

Two lines do not overlap (shared/docs/neuron-runtime.md):
- legacy: SDK 2.26 (the course's): kernels import `neuronxcc.nki`; the child compiles with
  `nki.baremetal(kernel, save_neff_name=...)`; outputs come back through libnrt and device
  time from `neuron-profile capture`/`view` (aws-neuronx-tools).
- current: SDK 2.32+ (nrtpy first ships with 2.32.0), the standalone `nki` wheel (NKI 0.6):
  the child compiles with `NKI_ARTIFACTS_DIR` set before nki is imported, as kernel[lnc] at the
  runtime's logical-NeuronCore degree; a separate nrtpy interpreter (GRADER_NRTPY_PYTHON) runs
  and times the NEFF (`benchmark(mode="device")`, its device events combined per call).

Each line compiles one NKI dialect (nkisim.dialects): legacy `neuronxcc.nki` kernels on the
legacy line, NKI 0.6 `nki` kernels on the current one (since SDK 2.30 neuronxcc.nki in a kernel
is a compile error, and the `nki` wheel has the 0.6 API). check_dialect() refuses a spec in the
other dialect before anything is compiled.

Settings (environment): GRADER_LIBNRT (default /opt/aws/neuron/lib/libnrt.so.1),
GRADER_NEURON_TOOLS (default /opt/aws/neuron/bin, where aws-neuronx-tools installs
neuron-profile), GRADER_NRTPY_PYTHON (current line: the nrtpy environment's python); the
runtime's own NEURON_LOGICAL_NC_CONFIG and NEURON_RT_VISIBLE_CORES are read, and each grade's
processes get the degree explicitly (runner._neuron_env: the sandbox's environment is minimal).
"""
from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from dataclasses import asdict, dataclass

from nkisim.dialects import CURRENT, LEGACY, dialect_named

from ..errors import GraderInputError

DEFAULT_LIBNRT = "/opt/aws/neuron/lib/libnrt.so.1"
DEFAULT_TOOLS = "/opt/aws/neuron/bin"


class NeuronUnavailable(GraderInputError):
    """This machine cannot grade on a NeuronCore; the message names what is missing."""


class WrongSdkLine(GraderInputError):
    """The spec's kernels are in a dialect this machine's SDK line does not compile."""


class WrongPlatform(GraderInputError):
    """The spec's thresholds are for another Trainium generation than this machine's."""


# nrt.h's instance families (libnrt.TRN1_FAMILIES / TRN2_FAMILIES) -> nkisim's platform: NeuronCore-v2
# on Trn1 and Inf2 [C2], v3 on Trn2 [C3], v4 on Trn3 [C4] (shared/docs/neuroncore-generations.md)
PLATFORM_OF_FAMILY = {"Trn1": "trn1", "Trn1n": "trn1", "Inf2": "trn1", "Inf2e": "trn1",
                      "Trn2": "trn2", "Trn2n": "trn2", "Trn2p": "trn2", "Trn2u": "trn2", "Trn2e": "trn2",
                      "Trn2eu": "trn2", "Trn2ac": "trn2", "Trn2uac": "trn2", "Trn3": "trn3", "Trn3pds98": "trn3"}


# instance families with EC2 instance types of that name (trn1.2xlarge, trn1n.32xlarge, inf2.xlarge,
# trn2.48xlarge, trn2u.48xlarge); Trn3's types are not public (shared/docs/neuroncore-generations.md 2.2)
EC2_FAMILIES = {"Trn1", "Trn1n", "Inf2", "Trn2", "Trn2u"}


# each line: the dialect it compiles, what its kernels are called, and the course's spec in it
DIALECT_OF_LINE = {"legacy": LEGACY, "current": CURRENT}
KERNELS_OF_LINE = {"legacy": "legacy NKI", "current": "NKI 0.6"}
SPEC_OF_LINE = {"legacy": "asst4-trainium2", "current": "asst4-trainium2-nki06"}


@dataclass(frozen=True)
class NeuronSetup:
    line: str                    # "legacy" | "current"
    sdk: str                     # what compiles, with its version
    cores: int                   # the logical NeuronCores this process's runtime sees (libnrt)
    libnrt: str
    tools: str
    nrtpy_python: str | None     # current line only
    # the runtime's logical-NeuronCore degree: physical cores per logical one, which every NEFF
    # is compiled for and loaded at (NEURON_LOGICAL_NC_CONFIG, else the platform's default)
    lnc: int = 2
    lnc_source: str = "Trn2's default"
    visible: tuple = ()          # the instance's numbers of the cores it sees (NEURON_RT_VISIBLE_CORES)
    family: str | None = None    # nrt_get_instance_info's instance family ("Trn1"); None: not reported
    size: str | None = None      # and its size ("2xlarge")
    platform: str | None = None  # the generation as nkisim names it (trn1, trn2, trn3); None: unknown

    def generation(self) -> str:
        """What the doctor prints: the generation found and where that came from."""
        if self.platform is None:
            return (f"unknown: the Neuron runtime does not report which instance this is"
                    + (f" (family {self.family})" if self.family else ""))
        from nkisim.cost import generation
        from nkisim.platforms import rules_for
        chip = rules_for(self.platform).hardware.split(",")[0]
        # an EC2 type name only for families EC2 sells under that name; nrt.h's others as reported
        instance = (f"{self.family.lower()}.{self.size}" if self.size and self.family in EC2_FAMILIES else
                    f"a {self.family} instance" + (f" of size {self.size}" if self.size else ""))
        return (f"{chip} ({generation(self.platform).core}), platform {self.platform} "
                f"({instance}, from nrt_get_instance_info)")

    def job_fields(self) -> dict:
        return asdict(self)


def check_dialect(setup: NeuronSetup, spec) -> None:
    """Refuse to grade `spec` on this machine's SDK line when its kernels are in the other NKI
    dialect: every submission would fail to compile, through no fault of the student's."""
    wanted = DIALECT_OF_LINE[setup.line]
    if spec.dialect == wanted.name:
        return
    written = dialect_named(spec.dialect)
    other = next(line for line, d in DIALECT_OF_LINE.items() if d is written)
    raise WrongSdkLine(
        f"the {setup.line} Neuron SDK line ({setup.sdk}) compiles {KERNELS_OF_LINE[setup.line]} kernels "
        f"(import {wanted.package}) only, and spec {spec.assignment!r} is written in {written.label}",
        f"On this machine grade with the {SPEC_OF_LINE[setup.line]} spec, or another "
        f"{KERNELS_OF_LINE[setup.line]} spec; grade {spec.assignment!r} on a {other}-line worker "
        f"({written.sdk}) or with --backend sim.")


def check_platform(setup: NeuronSetup, spec) -> None:
    """Refuse to grade `spec` on this machine when its platform is not this machine's
    generation: its thresholds were measured on another chip, and its NEFFs target it."""
    if setup.platform == spec.platform:
        return
    if setup.platform is None:
        raise WrongPlatform(
            f"this machine's Trainium generation is {setup.generation()}, so it cannot be checked against spec "
            f"{spec.assignment!r} (platform {spec.platform})",
            "Update the Neuron runtime (aws-neuronx-runtime-lib: nrt_get_instance_info reports the instance), "
            "or grade with --backend sim.")
    raise WrongPlatform(
        f"this machine is {setup.generation()}, and spec {spec.assignment!r} is for platform {spec.platform}: "
        f"its thresholds were measured on that generation",
        f"On this machine grade a spec whose platform is {setup.platform}; grade {spec.assignment!r} on a "
        f"{spec.platform} worker or with --backend sim.")


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
        cores = nrt.visible_cores(libnrt)
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


# The logical-NeuronCore degree (about-neuron/arch/neuron-features/logical-neuroncore-config):
# "LNC can only be set to 1 or 2 ... On Trn2 ... LNC=2 (default) ... LNC applies only to Trn2
# and Trn3 instances"; the runtime reads it from NEURON_LOGICAL_NC_CONFIG, and a NEFF must be
# compiled at the runtime's degree ("Mismatching the two will cause a runtime error": nki.jit,
# nki/api/generated/nki.jit, SDK 2.31; compiler error EVRF066: "neuronx-cc defaults to LNC=2 on
# Trn2 and later").
LNC_VARIABLE = "NEURON_LOGICAL_NC_CONFIG"


def _lnc(environ, family: str | None) -> tuple[int, str]:
    """(degree, where it comes from) for this machine's runtime."""
    from .libnrt import TRN1_FAMILIES, TRN2_FAMILIES
    raw = environ.get(LNC_VARIABLE, "").strip()
    trn1 = family in TRN1_FAMILIES.values()
    if raw:
        if raw not in ("1", "2"):
            raise NeuronUnavailable(f"logical NeuronCores: {LNC_VARIABLE}={raw} is no degree the Neuron runtime "
                                    f"supports (1 or 2 physical NeuronCores per logical one)",
                                    f"Set {LNC_VARIABLE} to 1 or 2, or unset it for the platform's default "
                                    f"(2 on Trn2, 1 on Trn1).")
        if raw == "2" and trn1:
            raise NeuronUnavailable(f"logical NeuronCores: {LNC_VARIABLE}=2 on a {family} instance, where the "
                                    f"runtime supports LNC=1 only (LNC applies to Trn2 and Trn3)",
                                    f"Unset {LNC_VARIABLE} or set it to 1 on this instance.")
        return int(raw), f"{LNC_VARIABLE}={raw}"
    if trn1:
        return 1, f"{family}'s default"
    if family in TRN2_FAMILIES.values():
        return 2, f"{family}'s default"
    raise NeuronUnavailable(f"logical NeuronCores: the Neuron runtime does not say which instance family this is, "
                            f"so its default degree is unknown and {LNC_VARIABLE} is not set",
                            f"Set {LNC_VARIABLE} to the runtime's degree (2 on Trn2, 1 on Trn1).")


def parse_cores(raw: str) -> tuple[int, ...]:
    """NEURON_RT_VISIBLE_CORES: "a single NeuronCore index or an" inclusive range ("1-3"), or
    a comma list of them (neuron-runtime/guides/configuration-guide, nrt-env-var-reference).
    ValueError for anything else."""
    cores: list[int] = []
    for part in raw.split(","):
        lo, dash, hi = part.strip().partition("-")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first < 0 or last < first:
            raise ValueError(raw)
        cores.extend(range(first, last + 1))
    if len(set(cores)) != len(cores):
        raise ValueError(raw)
    return tuple(cores)


def _visible(environ, count: int) -> tuple[int, ...]:
    """The instance's numbers of the cores this process sees: what NEURON_RT_VISIBLE_CORES names,
    which must be as many as the runtime counts; without it, the runtime's first `count`."""
    raw = environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if not raw:
        return tuple(range(count))
    try:
        cores = parse_cores(raw)
    except ValueError:
        raise NeuronUnavailable(f"NEURON_RT_VISIBLE_CORES={raw} is not a NeuronCore list",
                                "Give NeuronCore numbers or ranges, e.g. 0-1 or 0,2,4, or unset it.") from None
    if len(cores) != count:
        raise NeuronUnavailable(f"NEURON_RT_VISIBLE_CORES={raw} names {len(cores)} NeuronCores and the Neuron "
                                f"runtime sees {count}",
                                "Name only NeuronCores this instance has (at its logical-NeuronCore degree).")
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
    """The machine's Neuron setup, checked in the order a TA fixes it: device, the runtime's
    configuration (logical-NeuronCore degree, visible cores), SDK, tools, interpreter. Raises
    NeuronUnavailable naming the first thing missing."""
    environ = os.environ if environ is None else environ
    libnrt = environ.get("GRADER_LIBNRT") or DEFAULT_LIBNRT
    tools = environ.get("GRADER_NEURON_TOOLS") or DEFAULT_TOOLS
    cores = _device(libnrt)
    from .libnrt import instance
    family, size = instance(libnrt)
    lnc, lnc_source = _lnc(environ, family)
    runtime = {"lnc": lnc, "lnc_source": lnc_source, "visible": _visible(environ, cores), "family": family,
               "size": size, "platform": PLATFORM_OF_FAMILY.get(family)}
    nki_version = _version("nki") if _importable("nki") else None
    if _nki_is_current(nki_version):
        return NeuronSetup("current", f"nki {nki_version}", cores, libnrt, tools, _nrtpy(environ), **runtime)
    if _importable("neuronxcc") and _importable("neuronxcc.nki"):
        profile = os.path.join(tools, "neuron-profile")
        if not (os.path.isfile(profile) and os.access(profile, os.X_OK)):
            raise NeuronUnavailable(f"tools missing: {profile} (aws-neuronx-tools) times NEFFs on the SDK 2.26 line",
                                    "Install aws-neuronx-tools, or set GRADER_NEURON_TOOLS to the folder holding "
                                    "neuron-profile.")
        return NeuronSetup("legacy", f"neuronx-cc {_version('neuronx-cc') or '(version unknown)'}", cores, libnrt,
                           tools, None, **runtime)
    raise NeuronUnavailable(f"Neuron SDK missing: this Python ({sys.executable}) imports neither neuronxcc.nki "
                            f"(SDK 2.26) nor the nki 0.2+ wheel (SDK 2.32+, with nrtpy)" +
                            (f"; nki {nki_version} is older than 0.2" if nki_version else ""),
                            "Install the grader into the Neuron SDK's Python environment (the one with "
                            "neuronx-cc, or with the nki wheel).")

"""The NKI rules of the three Trainium generations, and one table of where they differ.

`trn2` is the Fall 2025 assignment: Trainium2 (NeuronCore-v3), Neuron SDK 2.26 with
neuronx-cc 2.21. `trn1` is the Fall 2024 assignment: Trainium1 (NeuronCore-v2), Neuron SDK
2.20/2.21. `trn3` is Trainium3 (NeuronCore-v4), which no offering has run on yet: NKI 0.6 (SDK
2.32) documents it. An assignment spec names its platform; the grader passes it to the
simulator as `SimSettings(platform=...)`, or process-wide with `nkisim.install(platform=...)`.
Each generation's cost parameters are nkisim.cost.generations'. Sources are the ones in
shared/docs/nki-api.md and shared/docs/neuroncore-generations.md (tags in brackets).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from .limits import HardwareLimits
from .running import RUNNING

KIB = 1024


@dataclass(frozen=True, kw_only=True)
class PlatformRules:
    name: str
    course: str
    hardware: str
    sdk: str
    nc_version: int                     # nisa.get_nc_version(): gen2 (Trn1), gen3 (Trn2), gen4 (Trn3)
    sbuf_partition_bytes: int           # physical SBUF per partition
    sbuf_reserved_bytes: int            # kept by the compiler/runtime, not for kernels
    hbm_tensor_init_value: bool         # nl.zeros/ones/full(..., buffer=nl.hbm) accepted
    logging_off: bool                   # `logging.OFF` exists for kernel files

    @property
    def sbuf_usable_bytes(self) -> int:
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    def hardware_limits(self) -> HardwareLimits:
        return HardwareLimits(sbuf_partition_bytes=self.sbuf_partition_bytes,
                              sbuf_reserved_bytes=self.sbuf_reserved_bytes)


PLATFORMS: dict[str, PlatformRules] = {
    "trn2": PlatformRules(
        name="trn2", course="CS149 Fall 2025 (asst4-trainium2)", hardware="Trainium2, NeuronCore-v3",
        sdk="Neuron SDK 2.26 (neuronx-cc 2.21)", nc_version=3,
        # 28 MiB = 128 x 224 KiB [ARCH3-27]; a compiler-2.21 NEFF reserves 8 B per partition
        # for the runtime at offset 229,368 and its DMAs reach SBUF offset 229,120 [CL-NEFF]
        sbuf_partition_bytes=224 * KIB, sbuf_reserved_bytes=8,
        # err_hbm_tensor_with_init_value_not_supported exists since SDK 2.22 [ERR]
        hbm_tensor_init_value=False,
        logging_off=False),
    "trn1": PlatformRules(
        name="trn1", course="CS149 Fall 2024 (asst4-trainium)", hardware="Trainium1, NeuronCore-v2",
        sdk="Neuron SDK 2.20/2.21", nc_version=2,
        # 24 MiB = 128 x 192 KiB [ARCH2]; "Total SB Partition Size: 196608" in a 2024 compiler
        # log [I1060]; 16 KiB per partition reserved by the compiler on v2 [DA]
        sbuf_partition_bytes=192 * KIB, sbuf_reserved_bytes=16 * KIB,
        hbm_tensor_init_value=True,
        # the 2024 part-1 template calls logging.disable(logging.OFF) and ran on that SDK
        logging_off=True),
    "trn3": PlatformRules(
        name="trn3", course="no offering yet (Trainium3 as NKI 0.6 documents it)",
        hardware="Trainium3, NeuronCore-v4", sdk="Neuron SDK 2.32 (NKI 0.6)", nc_version=4,
        # 32 MiB per core [A4][C4] over 128 partitions; the runtime's reserve is not documented
        # for NC-v4: assumed NC-v3's 8 B (a compiler-2.21 Trn2 NEFF's)
        sbuf_partition_bytes=256 * KIB, sbuf_reserved_bytes=8,
        hbm_tensor_init_value=False,
        logging_off=False),
}
DEFAULT_PLATFORM = "trn2"


@dataclass(frozen=True)
class Difference:
    rule: str
    trn1: str
    trn2: str
    source: str
    applied: str        # where nkisim applies it ("documented only" when it does not)
    trn3: str = "as trn2"


DIFFERENCES: tuple[Difference, ...] = (
    Difference("HBM tensor created with an initial value (nl.zeros/ones/full, buffer=nl.hbm)",
               "allowed", "err_hbm_tensor_with_init_value_not_supported",
               "the error code first appears in SDK 2.22's error list [ERR]",
               "nl.zeros/ones/full/zeros_like/ones_like"),
    Difference("logging.OFF", "defined (the 2024 template calls logging.disable(logging.OFF))",
               "not defined (plain Python logging has no OFF level)",
               "2024 asst4 part-1 template; Python's logging module",
               "nkisim.install(platform=...) / platforms.apply_host_rules"),
    Difference("SBUF per partition, physical", "192 KiB (24 MiB per core)", "224 KiB (28 MiB per core)",
               "[ARCH2] [I1060]; [ARCH3-27] [NCV3]; [A4] [C4]", "SimSettings(platform=...).limits",
               trn3="256 KiB (32 MiB per core)"),
    Difference("SBUF per partition reserved by compiler/runtime", "16 KiB", "8 B (at offset 229,368)",
               "[DA]; the course's compiler-2.21 NEFF [CL-NEFF]", "SimSettings(platform=...).limits"),
    Difference("nisa.get_nc_version()", "nc_version.gen2", "nc_version.gen3", "[ISA] nc_version enum",
               "nisa.get_nc_version", trn3="nc_version.gen4"),
    Difference("nl.tile_size.total_available_sbuf_size", "absent (new in SDK 2.26)", "present",
               "[RN226]", "documented only: nkisim always provides the Trn2 value"),
    Difference("dma_transpose axes= parameter", "absent (new in SDK 2.26)", "present", "[RN226]",
               "documented only"),
    Difference("nl.store of a PSUM tile", "not documented", "allowed, with an extra copy (new in 2.26)",
               "[RN226]", "documented only"),
    Difference("Scalar Engine arithmetic (nl.add/nl.multiply as ALU ops)", "Vector/GpSimd only",
               "also Scalar (NeuronCore-v3)", "[SHARED] ALU op table", "documented only"),
    Difference("engine clocks (Tensor/Vector/Scalar/GpSimd)", "2.8 / 1.12 / 1.4 / 1.4 GHz",
               "2.4 / 0.96 / 1.2 / 1.2 GHz", "[ARCH2]; [ARCH3-27]; [A4]",
               "nkisim.cost.generations (each generation's cost parameters)", trn3="2.4 / 1.2 / 1.2 / 1.2 GHz"),
    Difference("Vector and GpSimd engines reading or writing SBUF at once; Vector and Scalar PSUM",
               "not allowed: they take turns", "allowed", "[A2]; [A3]",
               "nkisim.cost.generations (shared access ports in the scheduler)"),
    Difference("hardware descriptor generation (DGE) for DMAs", "none: descriptors are prebuilt",
               "two DGE instances per core", "[A2]; [A3] nki-dge.rst",
               "nkisim.cost.generations (hardware_dge)", trn3="two DGE instances per core"),
    Difference("the MX matmul, quantize_mx, exponential, activate2, rand2 and BF16 PSUM accumulation",
               "absent", "absent", "[A4]; NKI 0.6 API reference", "the instructions refuse them before NC-v4",
               trn3="present"),
)


def rules_for(platform: str | None) -> PlatformRules:
    """The rules of `platform` ("trn1", "trn2" or "trn3"; None means the process default)."""
    if platform is None:
        platform = _default_platform
    try:
        return PLATFORMS[platform]
    except (KeyError, TypeError):
        known = ", ".join(f"{name!r} ({rules.course}, {rules.sdk})" for name, rules in PLATFORMS.items())
        raise ValueError(f"unknown platform {platform!r}: nkisim knows {known}; set the spec's "
                         "`platform` (or SimSettings(platform=...)) to one of them") from None


def current_rules() -> PlatformRules:
    """The rules of the kernel run in progress (the process default outside a run)."""
    machine = RUNNING.get()
    settings = getattr(machine, "settings", None)
    return rules_for(getattr(settings, "platform", None))


# ----- process-wide: what nkisim.install(platform=...) sets -------------------------------------

_default_platform = DEFAULT_PLATFORM
_added_logging_off = False


def default_platform() -> str:
    return _default_platform


def set_default_platform(platform: str) -> PlatformRules:
    """Make `platform` the default of every later run in this process and give kernel files
    the host-side names its SDK had (logging.OFF)."""
    global _default_platform
    rules = rules_for(platform)
    _default_platform = rules.name
    apply_host_rules(rules)
    return rules


def apply_host_rules(rules: PlatformRules) -> None:
    """logging.OFF exists exactly when the platform's SDK provided it. Any level above
    CRITICAL silences every message; the SDK's own value is not documented."""
    global _added_logging_off
    if rules.logging_off and not hasattr(logging, "OFF"):
        logging.OFF = logging.CRITICAL + 10
        _added_logging_off = True
    elif not rules.logging_off and _added_logging_off:
        del logging.OFF
        _added_logging_off = False


def reset() -> None:
    """Back to the Trn2 default, removing what set_default_platform added (nkisim.uninstall)."""
    set_default_platform(DEFAULT_PLATFORM)

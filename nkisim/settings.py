"""Simulator options, a frozen keyword-only dataclass, and the hardware limits they carry.

The limits themselves are declared in nkisim.limits (HardwareLimits, imported here under its old
name too); a run's platform (nkisim.platforms) gives the limits' defaults.
"""
from __future__ import annotations

from dataclasses import dataclass

from .limits import HardwareLimits
from .platforms import rules_for

__all__ = ["HardwareLimits", "SimSettings"]


@dataclass(frozen=True, kw_only=True)
class SimSettings:
    """Options of one simulated run. The defaults expose bugs rather than hide them."""

    # Whose NKI rules apply: "trn2" (Fall 2025, SDK 2.26) or "trn1" (Fall 2024, SDK 2.20/2.21);
    # None means the process default (trn2 unless nkisim.install(platform=...) said otherwise).
    platform: str | None = None
    # None: the platform's limits. (dataclasses.replace(s, platform=p) keeps s's limits;
    # pass limits=None with it to take p's.)
    limits: HardwareLimits | None = None
    # Fill uninitialised tiles (nl.ndarray) with NaN, as hardware leaves garbage there.
    fill_uninitialized_with_nan: bool = True
    # Leading block dimensions (nl.par_dim not first): compiler 2.21 only warns.
    block_dims_are_errors: bool = False
    # Record a trace record per executed instruction (needed for timing and profiles).
    record_trace: bool = True
    # nki.benchmark latencies are deterministic by default; a positive value multiplies each
    # benchmark iteration by log-normal noise of this standard deviation (e.g. 0.02 = ~2%).
    latency_noise: float = 0.0
    noise_seed: int = 0

    def __post_init__(self) -> None:
        rules = rules_for(self.platform)
        object.__setattr__(self, "platform", rules.name)
        if self.limits is None:
            object.__setattr__(self, "limits", rules.hardware_limits())

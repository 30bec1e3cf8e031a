"""Hardware limits and simulator options, each a frozen keyword-only dataclass.

Every limit the simulator enforces is declared here, once, with where its value comes from
(see ../shared/docs/nki-api.md section 3 and trn2-cost-model.md section 2).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class HardwareLimits:
    """Trainium2 (NeuronCore-v3) limits that the NKI compiler enforces."""

    # Partitions of SBUF/PSUM: the first dimension of any on-chip tile (nl.tile_size.pmax).
    pmax: int = 128
    # Matmul operand limits (nl.tile_size.gemm_stationary_fmax / gemm_moving_fmax).
    gemm_stationary_fmax: int = 128
    gemm_moving_fmax: int = 512
    # PSUM: 8 banks of 2 KiB per partition; a tile must fit in one bank.
    psum_bank_bytes: int = 2048
    psum_banks: int = 8
    # SBUF: 224 KiB per partition on NeuronCore-v3 (28 MiB / 128).
    sbuf_partition_bytes: int = 224 * 1024
    # What the compiler and runtime keep for themselves: a Trn2 NEFF from compiler 2.21
    # reserves 8 bytes per partition (16 KiB is NeuronCore-v2's figure; see platforms.py).
    sbuf_reserved_bytes: int = 8
    # Vector-engine transpose handles at most 32x32.
    vector_transpose_max: int = 32

    @property
    def sbuf_usable_bytes(self) -> int:
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    @property
    def psum_fmax(self) -> int:
        """Free size of a PSUM tile in fp32 elements (nl.tile_size.psum_fmax)."""
        return self.psum_bank_bytes // 4


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
        from .platforms import rules_for
        rules = rules_for(self.platform)
        object.__setattr__(self, "platform", rules.name)
        if self.limits is None:
            object.__setattr__(self, "limits", rules.hardware_limits())

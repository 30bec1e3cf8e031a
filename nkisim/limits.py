"""Hardware limits, a frozen keyword-only dataclass: plain data, below everything that checks them.

Every limit the simulator enforces is declared here, once, with where its value comes from
(see ../shared/docs/nki-api.md section 3 and trn2-cost-model.md section 2). A platform
(nkisim.platforms) gives its own values of some; nkisim.settings.SimSettings carries them.
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

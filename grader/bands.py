"""The simulator's error band for a kernel: how far a simulated p99 may be from Trainium2's, by
what bounds the kernel (nkisim.cost.profile.bound_by: tensor, vector, dma, latency). The bands are
the largest cross-validated errors of the calibration facts of each class, written by
`bench/fidelity.py --cross-validate --bands grader/fidelity_bands.json` (docs/cost-model.md); a
measured p99 (a Trainium worker's) has no band."""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path

BANDS_FILE = Path(__file__).with_name("fidelity_bands.json")


@functools.cache
def bands() -> dict[str, float]:
    """{class: band as a fraction}, read once."""
    with open(BANDS_FILE) as fh:
        data = json.load(fh)
    found = {}
    for bound, entry in data["bands"].items():
        band = entry["band"]
        if isinstance(band, bool) or not isinstance(band, (int, float)) or not 0 <= band < 1 or not math.isfinite(band):
            raise ValueError(f"{BANDS_FILE}: the band of {bound!r} must be a fraction in [0, 1), got {band!r}")
        found[bound] = float(band)
    return found


def credit_band() -> float:
    """The band within which a spec's borderline = "credit" credits a threshold: the smallest of
    any class (grader.scoring.timed_verdict says why not the kernel's own)."""
    return min(bands().values())


def band_of(profile: dict | None) -> tuple[float, str] | None:
    """(band, class) of a simulated run from its profile summary, or None without one (a
    measured run, or a profile of an older grader without the class)."""
    bound = (profile or {}).get("bound")
    if not isinstance(bound, str) or bound not in bands():
        return None
    return bands()[bound], bound

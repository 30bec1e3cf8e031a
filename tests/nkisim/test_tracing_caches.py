"""What tracing caches to keep its per-instruction cost down gives what it gave uncached."""
import itertools

import numpy as np

from nkisim import dtypes
from nkisim.source import SourceSite, user_site


def test_promotion_cached_per_dtype_object_keeps_tf32_apart_from_float32():
    kinds = [dtypes.float32, dtypes.tfloat32, dtypes.bfloat16, dtypes.float16, dtypes.int32, dtypes.uint8,
             np.dtype(bool), dtypes.int16, dtypes.float8_e4m3]
    for a, b in itertools.product(kinds, repeat=2):          # float32 pairs are cached before tf32's
        first, again = dtypes.promote(a, b), dtypes.promote(a, b)
        assert first is again
        assert first == dtypes._promote(a, b) and dtypes.is_tf32(first) == dtypes.is_tf32(dtypes._promote(a, b))
    # tf32 equals float32 as a NumPy dtype (metadata is ignored), yet promotes on its own rule
    assert dtypes.tfloat32 == dtypes.float32 and dtypes.is_tf32(dtypes.tfloat32)
    assert dtypes.promote(dtypes.tfloat32, dtypes.bfloat16) == dtypes._promote(dtypes.tfloat32, dtypes.bfloat16)


def _site_here():
    return user_site(2)        # the line that called this


def test_a_line_has_one_source_site_equal_to_a_fresh_one():
    sites = [_site_here() for _ in range(3)]                 # the same line three times
    other = _site_here()
    assert sites[0] is sites[1] is sites[2]
    assert sites[0] == SourceSite(sites[0].filename, sites[0].lineno)
    assert other != sites[0] and other.lineno == sites[0].lineno + 1

"""NKI 0.6's op codes as nisa.activation's op, against the same NumPy definitions as the legacy
dialect's (tests/nkisim/test_language_math.py), and the version queries (a file of its own: an NKI
0.6 kernel's module may not hold the legacy namespace)."""
import numpy as np
import pytest

import nkisim

nkisim.install()

from test_language_math import UNARY  # noqa: E402

import nki  # noqa: E402
import nki.isa as nisa06  # noqa: E402
import nki.language as nl06  # noqa: E402


@nki.jit
def activation06(x, op=None):
    t = nl06.ndarray(x.shape, x.dtype, buffer=nl06.sbuf)
    nisa06.dma_copy(dst=t, src=x)
    r = nl06.ndarray(x.shape, x.dtype, buffer=nl06.sbuf)
    nisa06.activation(dst=r, op=op, data=t)
    out = nl06.ndarray(x.shape, x.dtype, buffer=nl06.shared_hbm)
    nisa06.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("name", ["erf", "gelu", "gelu_apprx_sigmoid", "gelu_dx", "softplus", "mish", "silu_dx",
                                  "rsqrt", "sqrt", "log", "arctan", "sign"])
def test_the_nki06_op_codes_activate_as_their_definitions(name):
    ref, domain = UNARY[name]
    x = np.random.default_rng(len(name) + 7).uniform(-2, 2, (128, 32)).astype(np.float32)
    if domain == "positive":
        x = np.abs(x) + np.float32(0.25)
    np.testing.assert_allclose(activation06(x, op=getattr(nl06, name)), ref(x.astype(np.float64)),
                               rtol=5e-5, atol=1e-6)


def test_the_nki06_version_queries_name_the_traced_platform():
    seen = []

    @nki.jit
    def kernel(x):
        seen.append((nisa06.get_nc_version(), nisa06.get_nc_sub_version()))
        out = nl06.ndarray(x.shape, x.dtype, buffer=nl06.shared_hbm)
        nisa06.dma_copy(dst=out, src=x)
        return out

    kernel(np.zeros((4, 4), np.float32))
    assert seen == [(nisa06.nc_version.gen3, 0)] and "annotations" not in dir(nisa06)

"""The legacy dialect's nki.language math that no other test names, each against NumPy from the
2.26 reference's definitions: the unary functions (trigonometric, rounding, erf and the GELU
family, softplus, mish, the derivatives), the reductions all, prod and var, logical_not and
invert, ones_like, private_hbm, and the narrow dtypes as tile types."""
import math

import numpy as np
import pytest

import nkisim

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402

ERF = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@nki.jit
def unary(x, op=None):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nl.store(out, op(nl.load(x)))
    return out


# name: (NumPy from the reference's definition, the domain it is checked on)
UNARY = {
    "arctan": (np.arctan, "any"), "cos": (np.cos, "any"), "tan": (np.tan, "any"),
    "ceil": (np.ceil, "any"), "floor": (np.floor, "any"), "trunc": (np.trunc, "any"), "sign": (np.sign, "any"),
    "log": (np.log, "positive"), "sqrt": (np.sqrt, "positive"), "rsqrt": (lambda x: 1 / np.sqrt(x), "positive"),
    "erf": (ERF, "any"),
    "erf_dx": (lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x), "any"),
    "gelu": (lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2))), "any"),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), "any"),
    "gelu_dx": (lambda x: 0.5 * (1 + ERF(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi), "any"),
    "softplus": (lambda x: np.log1p(np.exp(x)), "any"),
    "mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))), "any"),
    "silu_dx": (lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), "any"),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_follow_their_definitions(name):
    ref, domain = UNARY[name]
    x = np.random.default_rng(len(name)).uniform(-2, 2, (128, 64)).astype(np.float32)
    if domain == "positive":
        x = np.abs(x) + np.float32(0.25)
    got = unary(x, op=getattr(nl, name))
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=5e-5, atol=1e-6)


@nki.jit
def reduced(x, op=None):
    out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, op(nl.load(x), axis=1, keepdims=True, dtype=nl.float32))
    return out


@pytest.mark.parametrize("name, ref", [("prod", np.prod), ("var", np.var),
                                       ("all", lambda x, axis, keepdims: np.all(x != 0, axis=axis, keepdims=keepdims))])
def test_reductions_prod_var_and_all(name, ref):
    r = np.random.default_rng(3)
    x = r.uniform(0.5, 1.5, (128, 12)).astype(np.float32)
    if name == "all":
        x[::3, 5] = 0.0                          # every third partition has a zero
    got = reduced(x, op=getattr(nl, name))
    np.testing.assert_allclose(got, ref(x.astype(np.float64), axis=1, keepdims=True), rtol=2e-5)


def test_logical_not_and_invert():
    @nki.jit
    def kernel(x, bits):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        inv = nl.ndarray(bits.shape, bits.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.logical_not(nl.load(x), dtype=nl.float32))
        nl.store(inv, nl.invert(nl.load(bits)))
        return out, inv

    x = np.array([[0.0, 1.0, -2.0, 0.0]] * 128, np.float32)
    bits = np.arange(128 * 4, dtype=np.int32).reshape(128, 4)
    got, inv = kernel(x, bits)
    np.testing.assert_array_equal(got, (x == 0).astype(np.float32))
    np.testing.assert_array_equal(inv, np.invert(bits))


def test_ones_like_private_hbm_and_narrow_tile_dtypes():
    @nki.jit
    def kernel(x):
        scratch = nl.ndarray(x.shape, x.dtype, buffer=nl.private_hbm)
        nl.store(scratch, nl.ones_like(nl.load(x)))
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        t8 = nl.load(scratch).astype(nl.float8_e4m3)
        t5 = t8.astype(nl.float8_e5m2)
        u8 = nl.load(scratch).astype(nl.uint8)
        nl.store(out, nl.add(t5.astype(nl.float32), u8.astype(nl.float32)))
        return out

    got = kernel(np.zeros((128, 8), np.float32))
    np.testing.assert_array_equal(got, np.full((128, 8), 2.0, np.float32))


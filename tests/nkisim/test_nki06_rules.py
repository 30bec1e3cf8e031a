"""The kernel-level rules NKI 0.3+ added, nki.jit / nki.simulate, and the documented environment
variables, as the NKI 0.6 front end applies them. Each refusal names the rule and the fix."""
import numpy as np
import pytest

import nkisim
from nkisim import errors

nkisim.install()

import neuronxcc.nki.language as legacy_nl  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

A = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)


def copy_through(a):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def honest(a):
    return copy_through(a)


def test_a_kernel_runs_called_on_arrays_through_simulate_and_at_lnc_1():
    np.testing.assert_array_equal(honest(A), A)
    np.testing.assert_array_equal(nki.simulate(honest)(A), A)
    np.testing.assert_array_equal(honest[1](A), A)
    np.testing.assert_array_equal(nki.simulate(copy_through)(A), A)    # an undecorated function too


@nki.jit
def identity_test(a, flag=None):
    if flag is None:
        return copy_through(a)
    return copy_through(a)


def helper_with_is(a):
    return copy_through(a) if a is not None else None


@nki.jit
def calls_helper_with_is(a):
    return helper_with_is(a)


@nki.jit
def keyword_only(a, *, scale=1):
    return copy_through(a)


@nki.jit
def returns_private_hbm(a):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def string_buffer(a):
    nl.ndarray(a.shape, a.dtype, buffer="sbuf")
    return copy_through(a)


@nki.jit
def decorated_inner(a):
    return copy_through(a)


@nki.jit
def calls_decorated_helper(a):
    return decorated_inner(a)


@nki.jit
def uses_legacy_inside(a):
    legacy_nl.ndarray(a.shape, a.dtype, buffer=legacy_nl.sbuf)
    return copy_through(a)


@pytest.mark.parametrize("call, error, words", [
    (lambda: identity_test(A), errors.KernelContractError, "identity comparisons"),
    (lambda: calls_helper_with_is(A), errors.KernelContractError, "(helper_with_is)"),
    (lambda: keyword_only(A), errors.KernelContractError, "keyword-only parameters"),
    (lambda: returns_private_hbm(A), errors.KernelContractError, "nl.shared_hbm"),
    (lambda: string_buffer(A), errors.MemorySpaceError, "is a string"),
    (lambda: calls_decorated_helper(A), errors.KernelContractError, "only the top-level kernel"),
    (lambda: honest([A]), errors.KernelContractError, "pass a tuple"),
    (lambda: uses_legacy_inside(A), errors.KernelContractError, "neuronxcc.nki inside an NKI kernel"),
    (lambda: honest[4](A), errors.ArgumentError, "at most 2 physical cores"),
    (lambda: nki.jit(platform_target="trn2"), errors.ArgumentError, "NEURON_PLATFORM_TARGET_OVERRIDE"),
    (lambda: nki.jit(mode="simulation"), errors.ArgumentError, "does not take mode"),
], ids=["is", "is-in-helper", "keyword-only", "private-hbm-return", "string-buffer", "decorated-helper",
        "list-argument", "legacy-inside", "lnc-4", "platform-target", "mode"])
def test_what_the_nki_compiler_refuses_since_0_3(call, error, words):
    with pytest.raises(error) as caught:
        call()
    assert words in str(caught.value)


def test_a_file_defining_a_refused_kernel_still_imports():
    """The compiler refuses a kernel when it compiles it (its first call), not at import: a test
    file that defines one cannot stop the others."""
    @nki.jit
    def refused_later(a, *, b=1):
        return a
    assert callable(refused_later)


@pytest.mark.parametrize("name, words", [
    ("baremetal", "nki.simulate"), ("benchmark", "nrtpy"), ("profile", "nkisim profile"),
    ("simulate_kernel", "nki.simulate"),
])
def test_the_retired_entry_points_say_what_replaced_them(name, words):
    with pytest.raises(errors.NoSuchNameError) as caught:
        getattr(nki, name)
    assert words in str(caught.value)


@pytest.mark.parametrize("module, name, words", [
    (nl, "arange", "plain integer slices"), (nl, "mgrid", "plain integer slices"),
    (nl, "par_dim", "partition dimension is always the first"),
    (nisa, "vector_engine", "nisa.engine.vector"),
])
def test_removed_legacy_names_give_their_migration_rule(module, name, words):
    with pytest.raises(errors.NoSuchNameError) as caught:
        getattr(module, name)
    assert words in str(caught.value)


def test_a_documented_name_not_simulated_is_a_stand_in_until_used():
    stand_in = nisa.local_gather
    with pytest.raises(errors.NotSimulatedError, match="local_gather is documented NKI"):
        stand_in()


def test_a_typo_suggests_the_name():
    with pytest.raises(errors.NoSuchNameError, match="did you mean nisa.tensor_tensor"):
        nisa.tensor_tensr


@pytest.mark.parametrize("value, platform", [("trn2", "trn2"), ("gen3", "trn2"), ("trn1", "trn1"),
                                             ("gen2", "trn1"), ("inf2", "trn1"), ("trn3", "trn3"),
                                             ("gen4", "trn3")])
def test_the_platform_comes_from_neuron_platform_target_override(monkeypatch, value, platform):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", value)
    expected = {"trn1": nisa.nc_version.gen2, "trn2": nisa.nc_version.gen3, "trn3": nisa.nc_version.gen4}[platform]

    @nki.jit
    def version(a):
        assert nisa.get_nc_version() == expected
        return copy_through(a)
    np.testing.assert_array_equal(version(A), A)


@pytest.mark.parametrize("value, most", [("trn1", 1), ("trn2", 2), ("trn3", 2)])
def test_the_logical_neuroncore_size_follows_the_platform(monkeypatch, value, most):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", value)
    np.testing.assert_array_equal(honest[most](A), A)          # the largest launch the platform has
    with pytest.raises(errors.ArgumentError, match=f"at most {most} physical core"):
        honest[most + 1]


@pytest.mark.parametrize("variable, value, error, words", [
    ("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9", errors.ArgumentError, "not a Neuron platform"),
    ("NKI_PRECISE_FP", "0", errors.NotSimulatedError, "own precision"),
])
def test_environment_values_nkisim_cannot_honour_are_errors(monkeypatch, variable, value, error, words):
    monkeypatch.setenv(variable, value)
    with pytest.raises(error) as caught:
        honest(A)
    assert words in str(caught.value)


def test_nki_precise_fp_1_is_what_nkisim_does(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    np.testing.assert_array_equal(honest(A), A)

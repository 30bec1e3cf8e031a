"""Nothing the simulator does not understand is accepted silently: the SDK 2.26 entry points
(nki.jit, nki.baremetal, nki.benchmark, nki.profile) take the keywords their pages document, the
platform nki.jit names is the one simulated, and a keyword no instruction or nl function
documents is an error at the kernel's line, never dropped (a dropped dst= used to leave the
output all NaN)."""
import inspect

import numpy as np
import pytest

import nkisim
from nkisim import errors

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.compiler as ncc  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
import nki as nki06  # noqa: E402
import nki.isa as nisa06  # noqa: E402
import nki.language as nl06  # noqa: E402
from nkisim.alu import NkiOp  # noqa: E402


def copy_kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


@pytest.mark.parametrize("call, words", [
    (lambda: nki.baremetal(copy_kernel, bogus=1), "nki.baremetal does not take bogus"),
    (lambda: nki.benchmark(copy_kernel, save_neff="x.neff"), "nki.benchmark does not take save_neff"),
    (lambda: nki.benchmark(copy_kernel, warmup=-1), "non-negative"),
    (lambda: nki.benchmark(copy_kernel, iters=0), "positive"),
    (lambda: nki.jit(copy_kernel, mode="fast"), "the modes are"),
    (lambda: nki.jit(copy_kernel, mode="simulation", warmup=2), "does not take warmup"),
    (lambda: nki.jit(copy_kernel, mode="simulation", platform_target="trn9"), "nkisim models"),
    (lambda: nki.profile(working_directory="/tmp", bogus=True), "bogus"),
])
def test_entry_points_refuse_undocumented_keywords(call, words):
    with pytest.raises(errors.ArgumentError, match=words):
        call()


def test_documented_keywords_are_taken():
    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(nki.baremetal(copy_kernel, save_neff_name="file.neff",
                                                additional_compile_opt="--disable-dge")(a), a)
    bench = nki.benchmark(copy_kernel, warmup=2, iters=5, save_neff_name="file.neff")
    np.testing.assert_array_equal(bench(a), a)
    assert bench.benchmark_result.nc_latency.get_latency_percentile(99) > 0


def test_platform_target_chooses_the_simulated_platform():
    @nki.jit(mode="simulation", platform_target="trn1")
    def on_trn1(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    @nki.jit(mode="simulation", platform_target="trn2")
    def on_trn2(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    a = np.ones((128, 4), np.float32)
    assert nkisim.run_kernel(on_trn1, (a,), {}).program.platform == "trn1"
    assert nkisim.run_kernel(on_trn2, (a,), {}).program.platform == "trn2"


def test_a_dropped_destination_is_an_error_not_an_all_nan_output():
    """The legacy dialect's nisa.tensor_copy and nisa.nc_matmul return their result: a 0.6-style
    dst= is an unknown keyword there, refused with the call's signature."""
    @nki.jit
    def copy_into(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        t2 = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t2, src=t)
        nl.store(out, t2)
        return out

    @nki.jit
    def matmul_into(a):
        out = nl.ndarray((128, 128), a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=t)
        nl.store(out, nl.copy(ps))
        return out

    a = np.ones((128, 128), np.float32)
    for kernel in (copy_into, matmul_into):
        with pytest.raises(errors.ArgumentError, match="dst"):
            kernel(a)


def test_an_unknown_keyword_to_an_nl_op_is_refused_in_both_dialects():
    @nki.jit
    def legacy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), 1.0, bogus=2))
        return out

    @nki06.jit
    def current(a):
        out = nl06.ndarray(a.shape, a.dtype, buffer=nl06.shared_hbm)
        t = nl06.ndarray(a.shape, a.dtype, buffer=nl06.sbuf)
        nisa06.dma_copy(dst=t, src=a)
        nisa06.tensor_scalar(dst=t, data=t, op0=nl06.add, operand0=1.0, bogus=2)
        nisa06.dma_copy(dst=out, src=t)
        return out

    a = np.ones((128, 4), np.float32)
    for kernel in (legacy, current):
        with pytest.raises(errors.NKISimError, match="bogus"):
            kernel(a)


# the public callables that take **kwargs, and why each may
KWARGS_ALLOWED = {
    "nki.baremetal": "checked against nki.baremetal's documented keywords",
    "nki.benchmark": "checked against nki.benchmark's documented keywords",
    "nki.jit": "checked against the keywords of the mode it names",
    "nki.profile": "checked against nki.profile's documented keywords",
    "nki.simulate_kernel": "its keywords are the kernel's own arguments",
}


def test_no_public_callable_swallows_keywords():
    """A walk over both dialects' public names: a **kwargs parameter is allowed only where the
    keywords are checked (KWARGS_ALLOWED); the op codes (nl.add, ...) refuse unknown keywords
    when called (the test above)."""
    swallowing = []
    for prefix, module in (("nki", nki), ("nl", nl), ("nisa", nisa), ("ncc", ncc), ("nki06", nki06),
                           ("nl06", nl06), ("nisa06", nisa06)):
        for name in dir(module):
            obj = getattr(module, name, None)
            if name.startswith("_") or not callable(obj) or inspect.isclass(obj) or isinstance(obj, NkiOp):
                continue
            try:
                params = inspect.signature(obj).parameters.values()
            except (TypeError, ValueError):
                continue
            label = f"{prefix}.{name}".replace("nki06.", "nki.").replace("nl06.", "nl.").replace("nisa06.", "nisa.")
            if any(p.kind is p.VAR_KEYWORD for p in params) and label not in KWARGS_ALLOWED:
                swallowing.append(f"{prefix}.{name}")
    assert swallowing == []

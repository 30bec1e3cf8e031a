"""NKI 0.6's tensor views (t.ap(), permute, slice, select, ...), its subscript rule, its runtime
loops with their counter registers, and nl.no_reorder: values against NumPy, the documented
refusals, and what the legacy dialect does not have."""
import numpy as np
import pytest

import nkisim
from nkisim import cost, errors

nkisim.install()

import neuronxcc.nki as lnki  # noqa: E402
import neuronxcc.nki.isa as lisa  # noqa: E402
import neuronxcc.nki.language as lnl  # noqa: E402
import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
from kernel_helpers import load, sbuf, store  # noqa: E402


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def store_copy(view):
    """A copy of `view` (any on-chip view) into a fresh output."""
    tile = sbuf(view.shape, view.dtype)
    nisa.tensor_copy(dst=tile, src=view)
    return store(tile)


def viewed(method):
    @nki.jit
    def kernel(a):
        return store_copy(method(load(a)))
    return kernel


# ----- views against NumPy ----------------------------------------------------------------------
@pytest.mark.parametrize("method, expected", [
    (lambda t: t.permute((0, 2, 1)), lambda a: a.transpose(0, 2, 1)),
    (lambda t: t.reshape_dim(2, (2, -1)), lambda a: a.reshape(128, 4, 2, 4)),
    (lambda t: t.flatten_dims(1, 2), lambda a: a.reshape(128, 32)),
    (lambda t: t.slice(2, 1, 7, 2), lambda a: a[:, :, 1:7:2]),
    (lambda t: t.select(1, 3), lambda a: a[:, 3, :]),
    (lambda t: t.select(1, -1), lambda a: a[:, -1, :]),
    (lambda t: t[:, 0:1, :].squeeze_dim(1), lambda a: a[:, 0, :]),
    (lambda t: t[:, 0:1, :].broadcast(1, 5), lambda a: np.repeat(a[:, 0:1, :], 5, axis=1)),
    (lambda t: t.expand_dim(2), lambda a: a[:, :, None, :]),
    (lambda t: t.permute((0, 2, 1)).slice(1, 2, 6).select(2, 1), lambda a: a.transpose(0, 2, 1)[:, 2:6, 1]),
])
def test_views_have_numpys_values(method, expected):
    a = data((128, 4, 8))
    np.testing.assert_array_equal(viewed(method)(a), expected(a))


def test_attributes_describe_the_view_in_elements():
    seen = {}

    @nki.jit
    def kernel(a):
        t = load(a)
        v = t[:, 1:3, 2:8:2]
        seen.update(strides=v.strides, offset=v.offset, pattern=v.get_pattern(), dense=t.is_contiguous(),
                    sparse=v.is_contiguous(), indirect=v.is_indirect())
        return store_copy(v)
    kernel(data((128, 4, 8)))
    assert seen == {"strides": (32, 8, 2), "offset": 10, "pattern": [[32, 128], [8, 2], [2, 3]], "dense": True,
                    "sparse": False, "indirect": False}


def test_an_access_pattern_pools_in_one_instruction():
    """2x2 max pool of (128, 8, 8): one tensor_reduce over [partition, h/2, w/2, kh, kw]."""
    @nki.jit
    def pool(a):
        t = load(a)
        window = t.ap([[64, 128], [16, 4], [2, 4], [8, 2], [1, 2]])
        out_tile = nl.ndarray((128, 4, 4), a.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=out_tile, op=nl.maximum, data=window, axis=(3, 4))
        out = nl.ndarray((128, 4, 4), a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=out_tile)
        return out
    a = data((128, 8, 8))
    run = nkisim.run_kernel(pool, (a,), {})
    np.testing.assert_array_equal(run.outputs, a.reshape(128, 4, 2, 4, 2).max(axis=(2, 4)))
    assert [r.opcode for r in run.trace].count("tensor_reduce") == 1


def test_an_access_pattern_starts_at_the_views_offset_plus_its_own():
    @nki.jit
    def kernel(a):
        t = load(a)
        return store_copy(t[:, 2:].ap([[16, 128], [2, 3]], offset=1))   # elements 3, 5, 7 of each row
    a = data((128, 16))
    np.testing.assert_array_equal(kernel(a), a[:, 3:8:2])


@pytest.mark.parametrize("method, error, words", [
    (lambda t: t.permute((1, 0, 2)), errors.ShapeError, "partition dimension"),
    (lambda t: t.broadcast(1, 4), errors.ShapeError, "not 1"),
    (lambda t: t.squeeze_dim(0), errors.ShapeError, "size 128, not 1"),
    (lambda t: t.flatten_dims(0, 1), errors.ShapeError, "partition dimension"),
    (lambda t: t.slice(1, 2, 9), errors.OutOfBoundsError, "end <= 4"),
    (lambda t: t.select(2, 8), errors.OutOfBoundsError, "out of range"),
    (lambda t: t.ap([[16, 128], [1, 32]]), errors.ShapeError, "its stride must be the storage's 32"),
    (lambda t: t.ap([[32, 128], [1, 33]]), errors.OutOfBoundsError, "reaches outside"),
    (lambda t: t.ap([[32, 128], [1, 8]], offset=-8), errors.OutOfBoundsError, "reaches outside"),
    (lambda t: t[64:].ap([[32, 128], [1, 8]]), errors.OutOfBoundsError, "reaches outside"),
    (lambda t: t.ap([[32, 128], [1, 8]], vector_offset=t), errors.NotSimulatedError, "run time"),
    (lambda t: t.rearrange("p a b -> p b a", "p b a"), errors.NotSimulatedError, "rearrange"),
    (lambda t: t.astype(nl.bfloat16), errors.NoSuchNameError, "nisa.tensor_copy"),
    (lambda t: t.broadcast_to((128, 4, 8)), errors.NoSuchNameError, "t.broadcast"),
])
def test_views_refuse_what_nki_06_refuses(method, error, words):
    with pytest.raises(error, match=words):
        viewed(method)(data((128, 4, 8)))


def test_a_legacy_kernel_has_no_06_views():
    @lnki.jit
    def kernel(a):
        t = lnl.load(a)
        out = lnl.ndarray(a.shape, a.dtype, buffer=lnl.shared_hbm)
        lnl.store(out, t.ap([[32, 128], [1, 32]]))
        return out
    with pytest.raises(errors.NoSuchNameError, match="NKI 0.6"):
        kernel(data((128, 32)))


# ----- subscripts --------------------------------------------------------------------------------
def test_on_chip_ints_keep_the_partition_dimension_and_two_dimensions():
    shapes = {}

    @nki.jit
    def kernel(a):
        t = nl.ndarray((64, 64, 8), nl.float32, buffer=nl.sbuf)
        shapes.update(p=t[3].shape, free=t[:, 2].shape, both=t[:, 2, 3].shape, all_ints=t[0, 0, 3].shape,
                      negative=t[-1, 0].shape, hbm=a[1].shape)
        nisa.memset(dst=t, value=0.0)
        return store_copy(t[0])
    kernel(data((4, 8)))
    assert shapes == {"p": (1, 64, 8), "free": (64, 8), "both": (64, 1), "all_ints": (1, 1), "negative": (1, 8),
                      "hbm": (8,)}


def test_an_int_subscript_selects_the_partition():
    @nki.jit
    def kernel(a):
        return store_copy(load(a)[5, 1:3])
    a = data((128, 4))
    np.testing.assert_array_equal(kernel(a), a[5:6, 1:3])


# ----- runtime loops -----------------------------------------------------------------------------
@nki.jit
def doubled_by_fori(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), a.dtype, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=t, src=a.ap([[256, 128], [1, 64]], scalar_offset=i, indirect_dim=1))
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[256, 128], [1, 64]], scalar_offset=i, indirect_dim=1), src=t)
    nl.fori_loop(0, 4, body)
    return out


def test_fori_loop_traces_each_iteration_with_its_counter():
    a = data((128, 4, 64))
    run = nkisim.run_kernel(doubled_by_fori, (a,), {})
    np.testing.assert_array_equal(run.outputs, a * 2)
    assert [r.opcode for r in run.trace].count("tensor_scalar") == 4


def test_dynamic_range_warns_and_selects_by_its_register():
    @nki.jit
    def kernel(a):
        t = load(a)
        out_tile = nl.ndarray((128, 8), a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=out_tile, value=0.0)
        for i in nl.dynamic_range(1, 4):
            nisa.tensor_tensor(dst=out_tile, data1=out_tile, data2=t.select(1, i), op=nl.add)
        out = nl.ndarray((128, 8), a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=out_tile)
        return out
    a = data((128, 4, 8))
    with pytest.warns(DeprecationWarning, match="fori_loop"):
        result = kernel(a)
    np.testing.assert_allclose(result, a[:, 1] + a[:, 2] + a[:, 3], rtol=1e-6)


def test_while_loop_runs_until_its_register_is_zero():
    @nki.jit
    def kernel(a):
        t = load(a)
        passes = []
        counter = nisa.register_alloc(3)
        done = nisa.register_alloc(0)

        def body(cond):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
            passes.append(1)
            nisa.register_move(cond, done if len(passes) == 3 else counter)
            return cond
        nl.while_loop(nisa.register_alloc(1), body)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    a = data((128, 8))
    np.testing.assert_array_equal(kernel(a), ((a + np.float32(1)) + np.float32(1)) + np.float32(1))


@pytest.mark.parametrize("body, error, words", [
    (lambda t, i: t, errors.KernelContractError, "returns nothing"),
    (lambda t, i: t[0:int(i)], TypeError, "not a Python int"),
    (lambda t, i: nisa.register_move(i, 3), errors.KernelContractError, "read-only"),
])
def test_a_fori_loop_body_is_held_to_the_rules(body, error, words):
    @nki.jit
    def kernel(a):
        t = load(a)
        nl.fori_loop(0, 2, lambda i: body(t, i))
        return store_copy(t)
    with pytest.raises(error, match=words):
        kernel(data((128, 8)))


def test_register_store_writes_each_traced_value_into_hbm_and_sbuf():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((1, 4), nl.int32, buffer=nl.shared_hbm)
        t = load(a)
        nisa.register_store(t[0:1, 0:1], nisa.register_alloc(-3))
        nl.fori_loop(0, 5, lambda i: nisa.register_store(out[0:1, 1:2], i))   # the last iteration's 4
        r = nisa.register_alloc(0)
        nisa.register_move(r, 2 ** 32 - 1)                     # 32 bits: -1 as an int32
        nisa.register_store(t[0:1, 2:3], r)
        nisa.dma_copy(dst=out[0:1, 0:1], src=t[0:1, 0:1])
        nisa.dma_copy(dst=out[0:1, 2:4], src=t[0:1, 2:4])
        return out
    a = np.arange(4, dtype=np.int32).reshape(1, 4)
    run = nkisim.run_kernel(kernel, (a,), {})
    np.testing.assert_array_equal(run.outputs, [[-3, 4, -1, 3]])
    stores = [r for r in run.trace if r.opcode == "register_store"]
    assert len(stores) == 7 and all(r.engine.label == "DMA" for r in stores)
    assert cost.estimate(run).total_ns > 0


@pytest.mark.parametrize("body, error, words", [
    (lambda t: nisa.register_store(t[0:1, 0:2], nisa.register_alloc(1)), errors.ShapeError, "exactly one element"),
    (lambda t: nisa.register_store(t[0:1, 0:1], 5), errors.ArgumentError, "VirtualRegister"),
    (lambda t: nisa.register_store(t[0:1, 0:1], nisa.register_alloc()), errors.KernelContractError, "no instruction"),
    (lambda t: nisa.register_store(sbuf((1, 1), nl.float32), nisa.register_alloc(1)), errors.NotSimulatedError,
     "bits or its value"),
    (lambda t: nisa.register_store(nl.ndarray((1, 1), nl.int32, buffer=nl.psum), nisa.register_alloc(1)),
     errors.MemorySpaceError, "psum"),
])
def test_register_store_refuses_what_it_cannot_store(body, error, words):
    @nki.jit
    def kernel(a):
        t = load(a)
        body(t)
        return store_copy(t)
    with pytest.raises(error, match=words):
        kernel(np.zeros((1, 4), np.int32))


def test_a_loop_inside_no_reorder_is_refused():
    @nki.jit
    def kernel(a):
        t = load(a)
        with nl.no_reorder():
            nl.fori_loop(0, 2, lambda i: None)
        return store_copy(t)
    with pytest.raises(errors.KernelContractError, match="no_reorder"):
        kernel(data((128, 8)))


# ----- no_reorder --------------------------------------------------------------------------------
def two_independent(ordered: bool):
    @nki.jit
    def kernel(a):
        x = load(a)
        outs = [nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf) for _ in range(2)]
        block = nl.no_reorder() if ordered else _nothing()
        with block:
            nisa.activation(dst=outs[0], op=nl.exp, data=x)          # Scalar engine
            nisa.tensor_scalar(dst=outs[1], data=x, op0=nl.add, operand0=1.0)   # Vector engine
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.tensor_tensor(dst=outs[0], data1=outs[0], data2=outs[1], op=nl.add)
        nisa.dma_copy(dst=out, src=outs[0])
        return out
    return kernel


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_no_reorder_runs_its_block_in_program_order_and_changes_no_values():
    a = data((128, 2048), 1)
    free, kept = (nkisim.run_kernel(two_independent(o), (a,), {}) for o in (False, True))
    np.testing.assert_array_equal(free.outputs, kept.outputs)
    slots = {o: {rec.opcode: slot for rec, slot in zip(run.trace, cost.estimate(run).slots)}
             for o, run in ((False, free), (True, kept))}
    # unordered, the two engines overlap; in the block the Vector op starts after the Scalar one ends
    assert slots[False]["tensor_scalar"].start < slots[False]["activation"].end
    assert slots[True]["tensor_scalar"].start >= slots[True]["activation"].end
    assert [bool(r.attrs.get("ordered")) for r in kept.trace if r.opcode in ("activation", "tensor_scalar")] == \
        [False, True]


# ----- never-written memory ----------------------------------------------------------------------
def test_never_written_memory_holds_the_documented_sentinels():
    """nki.simulate's: NaN for floats, 4 for integers (the legacy dialect keeps a byte pattern)."""
    @nki.jit
    def unwritten(a):
        ints = nl.ndarray((128, 4), nl.int32, buffer=nl.sbuf)
        floats = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        out_i = nl.ndarray((128, 4), nl.int32, buffer=nl.shared_hbm)
        out_f = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out_i, src=ints)
        nisa.dma_copy(dst=out_f, src=floats)
        return out_i, out_f

    @lnki.jit
    def unwritten_legacy(a):
        ints = lnl.ndarray((128, 4), lnl.int32, buffer=lnl.sbuf)
        out = lnl.ndarray((128, 4), lnl.int32, buffer=lnl.shared_hbm)
        lisa.dma_copy(dst=out, src=ints)
        return out
    out_i, out_f = unwritten(data((128, 4)))
    assert (out_i == 4).all() and np.isnan(out_f).all()
    assert (unwritten_legacy(data((128, 4))) == np.int32(np.uint32(0xA5A5A5A5).view(np.int32))).all()


# ----- nl's element-wise functions -----------------------------------------------------------------
@pytest.mark.parametrize("call, words", [
    (lambda t: nl.add(t, t, mask=None, foo=1), "unexpected keyword"),
    (lambda t: nl.exp(t, mask=t), "removed mask="),
    (lambda t: nl.sum(t, axis=1, negate=True), "unexpected keyword"),
])
def test_nl_functions_take_their_documented_arguments_only(call, words):
    @nki.jit
    def kernel(a):
        return store_copy(call(load(a)))
    with pytest.raises(errors.ArgumentError, match=words):
        kernel(data((128, 8)))


def test_nl_functions_compute_as_documented():
    @nki.jit
    def kernel(a):
        t = load(a)
        return store_copy(nl.sum(nl.multiply(t, nl.exp(t)), axis=1, keepdims=True))
    a = data((128, 8))
    np.testing.assert_allclose(kernel(a), (a * np.exp(a)).sum(axis=1, keepdims=True), rtol=1e-5)


def test_the_06_language_helpers():
    @nki.jit
    def kernel(a):
        eye = nl.shared_identity_matrix(128, dtype=nl.float32)
        t = load(a)
        assert isinstance(t, nl.NkiTensor) and nl.is_sbuf(t.buffer) and nl.is_on_chip(nl.psum)
        assert nl.is_hbm(a.buffer) and not nl.is_psum(nl.MemoryRegion.sbuf)
        positive = nl.where(nl.greater(t, 0.0), t, 0.0)
        product = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=product, stationary=eye, moving=positive)
        return store_copy(nl.copy(product))
    a = data((128, 128))
    np.testing.assert_array_equal(kernel(a), np.maximum(a, 0))


@pytest.mark.parametrize("name, words", [("average", "documenting"), ("gelu_apprx_sigmoid_dx", "formula")])
def test_06_language_names_nkisim_does_not_simulate_say_why(name, words):
    stand_in = getattr(nl, name)          # importing one is fine; using it says why it cannot run
    with pytest.raises(errors.NotSimulatedError, match=words):
        viewed(lambda t: nl.ndarray((128, 4), stand_in, buffer=nl.sbuf) if name.startswith("float")
               else stand_in(t))(data((128, 4)))


# ----- instruction handles and scheduling edges ---------------------------------------------------
HANDLES = []


def three_engines(schedule=None, edge=False):
    """An activation (Scalar) and a tensor_scalar (Vector) that need not wait for each other,
    optionally ordered by depends_on or by kernel.with_schedule."""
    @nki.jit
    def kernel(a):
        x = load(a)
        outs = [nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf) for _ in range(2)]
        first = nisa.activation(dst=outs[0], op=nl.exp, data=x, name="exp")
        second = nisa.tensor_scalar(dst=outs[1], data=x, op0=nl.add, operand0=1.0, name="add")
        HANDLES[:] = [first, second, second.depends_on(first) if edge else second]
        nisa.tensor_tensor(dst=outs[0], data1=outs[0], data2=outs[1], op=nl.add)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=outs[0])
        return out
    return kernel.with_schedule(schedule) if schedule else kernel


def slots_by_opcode(run):
    return {rec.opcode: slot for rec, slot in zip(run.trace, cost.estimate(run).slots)}


@pytest.mark.parametrize("how", ["depends_on", "with_schedule"])
def test_a_scheduling_edge_orders_two_instructions_and_changes_no_values(how):
    a = data((128, 2048), 3)
    free = nkisim.run_kernel(three_engines(), (a,), {})
    kernel = three_engines(edge=True) if how == "depends_on" else three_engines(schedule=[("add", "exp")])
    kept = nkisim.run_kernel(kernel, (a,), {})
    np.testing.assert_array_equal(free.outputs, kept.outputs)
    first, second, chained = HANDLES
    assert isinstance(first, nisa.NkiInstruction) and "activation" in repr(first) and chained == second
    unordered, ordered = slots_by_opcode(free), slots_by_opcode(kept)
    assert unordered["tensor_scalar"].start < unordered["activation"].end
    assert ordered["tensor_scalar"].start >= ordered["activation"].end
    assert [r.attrs.get("name") for r in kept.trace if r.opcode in ("activation", "tensor_scalar")] == ["exp", "add"]


def test_scheduling_edges_survive_the_program_format_and_forged_ones_are_refused():
    from nkisim import program as programs
    from nkisim.settings import HardwareLimits
    a = data((128, 256))
    run = nkisim.run_kernel(three_engines(edge=True), (a,), {})
    again = programs.decode(programs.encode(run.program))
    programs.validate(again, HardwareLimits(), [a])
    assert [r.attrs.get("after") for r in again.records] == [r.attrs.get("after") for r in run.program.records]
    again.records[1].attrs["after"] = [5]          # an edge from a later instruction
    with pytest.raises(programs.ProgramError, match="earlier instructions"):
        programs.validate(again, HardwareLimits(), [a])


@pytest.mark.parametrize("schedule, error, words", [
    ([("add", "nope")], errors.KernelContractError, "'nope'"),
    ([("exp", "add")], errors.NotSimulatedError, "program order"),
    ([("add",)], errors.ArgumentError, "pairs"),
])
def test_with_schedule_refuses_what_it_cannot_honour(schedule, error, words):
    with pytest.raises(error, match=words):
        three_engines(schedule=schedule)(data((128, 64)))


def test_depends_on_runs_from_an_earlier_instruction():
    @nki.jit
    def backwards(a):
        x = load(a)
        first = nisa.activation(dst=x, op=nl.exp, data=x)
        second = nisa.tensor_scalar(dst=x, data=x, op0=nl.add, operand0=1.0)
        first.depends_on(second)
        return store_copy(x)
    with pytest.raises(errors.KernelContractError, match="traced after this one"):
        backwards(data((128, 8)))


# ----- nl.softmax and nl.rms_norm, lowered onto the table's instructions ----------------------------
def softmax_of(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_and_rms_norm_in_both_dialects():
    a, w = data((128, 4, 32), 5), data((128, 4, 32), 6)

    @nki.jit
    def current(a, w):
        x, weights = load(a), load(w)
        return store_copy(nl.softmax(x, axis=-1)), store_copy(nl.rms_norm(x, weights, axis=(1, 2), n=128))

    @lnki.jit
    def legacy(a, w):
        x, weights = lnl.load(a), lnl.load(w)
        outs = [lnl.ndarray(a.shape, a.dtype, buffer=lnl.shared_hbm) for _ in range(2)]
        lnl.store(outs[0], lnl.softmax(x, axis=2))
        lnl.store(outs[1], lnl.rms_norm(x, weights, axis=(1, 2), n=128))
        return tuple(outs)
    rms = a / np.sqrt((a * a).sum(axis=(1, 2), keepdims=True) / 128 + 1e-6) * w
    for soft, norm in (current(a, w), legacy(a, w)):
        np.testing.assert_allclose(soft, softmax_of(a, 2), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(norm, rms, rtol=2e-5)


def test_softmax_over_the_partitions_is_refused():
    with pytest.raises(errors.ShapeError, match="partition dimension"):
        viewed(lambda t: nl.softmax(t, axis=0))(data((128, 8)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_nl_rand_is_uniform_in_0_1_and_follows_its_seed(dtype):
    def kernel_for(seeded):
        @nki.jit
        def draw(seed):
            if seeded:
                nl.random_seed(load(seed))
            values = nl.rand((128, 512), dtype)
            return store_copy(values)
        return draw
    seed = np.array([[7]], np.int32)
    first, again = kernel_for(True)(seed), kernel_for(True)(seed)
    other = kernel_for(True)(np.array([[8]], np.int32))
    assert first.dtype == dtype and ((first >= 0) & (first < 1)).all()
    assert abs(float(first.astype(np.float64).mean()) - 0.5) < 0.01
    np.testing.assert_array_equal(first, again)
    assert (first != other).mean() > 0.9
    unseeded = kernel_for(False)(seed)
    assert ((unseeded >= 0) & (unseeded < 1)).all()


def test_legacy_nl_rand_draws_too():
    @lnki.jit
    def draw(a):
        out = lnl.ndarray((128, 64), lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out, lnl.rand((128, 64), lnl.float32))
        return out
    values = draw(data((1, 1)))
    assert ((values >= 0) & (values < 1)).all() and len(np.unique(values)) > 8000


# ----- nl.shared_constant --------------------------------------------------------------------------
def plus_constant(table):
    @nki.jit
    def kernel(a):
        constant = nl.shared_constant(table)
        x, c = load(a), nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=c, src=constant)
        nisa.tensor_tensor(dst=x, data1=x, data2=c, op=nl.add)
        return store_copy(x)
    return kernel


def test_a_shared_constant_is_embedded_with_the_kernel(tmp_path):
    from nkisim import program as programs
    from nkisim.execute import execute
    from nkisim.settings import HardwareLimits
    table = data((128, 16), 9)
    a = data((128, 16), 10)
    run = nkisim.run_kernel(plus_constant(table), (a,), {})
    np.testing.assert_array_equal(run.outputs, a + table)
    again = programs.decode(programs.encode(run.program))
    programs.validate(again, HardwareLimits(), [a])
    np.testing.assert_array_equal(execute(again, [a]).outputs, run.outputs)
    embed = next(r for r in run.trace if r.opcode == "shared_constant")
    assert cost.estimate(run).slots[run.trace.index(embed)].end == 0          # loaded with the binary
    np.save(tmp_path / "table.npy", table)
    np.testing.assert_array_equal(plus_constant(str(tmp_path / "table.npy"))(a), a + table)
    two = nkisim.run_kernel(plus_constant(table)[2], (a,), {})
    assert [r.opcode for r in two.trace].count("shared_constant") == 1      # the cores share it


def test_a_shared_constant_is_an_array():
    with pytest.raises(errors.ArgumentError, match="NumPy array"):
        plus_constant([1.0, 2.0])(data((128, 16)))


def test_a_forged_constant_record_cannot_fill_on_chip_memory_for_free():
    """The embedded-constant record costs nothing (it is loaded with the binary): a program that
    turns a memset into one, writing SBUF from its params, is no program a kernel traced."""
    from nkisim import program as programs
    from nkisim.settings import HardwareLimits
    from nkisim.trace import Engine

    @nki.jit
    def filled(a):
        t = sbuf(a.shape)
        nisa.memset(dst=t, value=3.0)
        return store(t)
    a = data((128, 16))
    run = nkisim.run_kernel(filled, (a,), {})
    forged = programs.decode(programs.encode(run.program))
    rec = next(r for r in forged.records if r.opcode == "memset")
    values = np.full((128, 16), 3.0, np.float32)
    rec.opcode, rec.engine, rec.kind = "shared_constant", Engine.DMA, "constant"
    rec.params = {"bytes": values.reshape(-1).view(np.uint8), "dtype": "float32", "shape": [128, 16]}
    with pytest.raises(programs.ProgramError, match="shared-HBM"):
        programs.validate(forged, HardwareLimits(), [a])

"""SPMD launch grids of the legacy dialect (kernel[grid] with nl.program_id, nl.num_programs,
nl.program_ndim, nl.nc and nl.spmd_dim), on every entry point: values against NumPy, which
instance runs on which physical core (as the 2.26 reference's nl.nc and nl.spmd_dim pages list
them), the latency of instances on one core and on two, the program round trip, and the errors."""
import numpy as np
import pytest

import nkisim
from nkisim import cost, errors
from nkisim import program as programs
from nkisim.runtime import ArgSpec, trace_kernel
from nkisim.settings import HardwareLimits, SimSettings

nkisim.install()

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.isa as nisa  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402


def data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@nki.jit
def tiled_add(a, b):
    """out = a + b, each instance of a 2-D grid adding its block."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    rows, cols = a.shape[0] // nl.num_programs(0), a.shape[1] // nl.num_programs(1)
    i, j = nl.program_id(0), nl.program_id(1)
    block = (slice(i * rows, (i + 1) * rows), slice(j * cols, (j + 1) * cols))
    nl.store(out[block], nl.add(nl.load(a[block]), nl.load(b[block])))
    return out


SEEN = []


@nki.jit
def who_am_i(a):
    """Records, in tracing order, each instance's (program ids, grid, instances) as it sees them."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ids = tuple(nl.program_id(axis) for axis in range(nl.program_ndim()))
    SEEN.append((ids, nl.program_ndim(), nl.num_programs()))
    if ids == (0,) * nl.program_ndim():
        nl.store(out, nl.load(a))
    return out


@pytest.mark.parametrize("grid", [(2, 4), (4, 1), (2, 1), (nl.nc(2), 4), (nl.spmd_dim(nl.nc(2), 2), 2),
                                  (nl.spmd_dim(2, nl.nc(2)), 1)])
def test_every_instance_computes_its_block(grid):
    a, b = data((256, 512)), data((256, 512), 1)
    np.testing.assert_array_equal(tiled_add[grid](a, b), a + b)


def test_program_ids_and_sizes_per_instance_in_grid_order():
    SEEN.clear()
    who_am_i[2, 3](data((128, 8)))
    assert [ids for ids, _, _ in SEEN] == [(i, j) for i in range(2) for j in range(3)]
    assert {(ndim, n) for _, ndim, n in SEEN} == {(2, 6)}
    SEEN.clear()
    who_am_i(data((128, 8)))
    assert SEEN == [((), 0, 1)]


def cores_of(grid):
    """{program ids: physical core} of a traced launch, read from each instance's records."""
    @nki.jit
    def marked(a):
        out = nl.ndarray((128, 64), a.dtype, buffer=nl.shared_hbm)
        ids = [nl.program_id(axis) for axis in range(nl.program_ndim())]
        flat = ids[0] * nl.num_programs(1) + ids[1]
        nl.store(out[:, flat:flat + 1], nl.load(a[:, flat:flat + 1]))
        return out
    program, _ = trace_kernel(marked[grid], [ArgSpec((128, 64), np.float32)], {})
    placed = {}
    for rec in program.records:
        if rec.opcode == "dma_copy" and rec.writes[0].buffer == "shared_hbm":
            column = rec.writes[0].start % 64
            placed[divmod(column, 4 if grid[1] == 4 else 2)] = rec.attrs.get("core", 0)
    return placed


def test_nl_nc_places_instances_on_the_physical_cores_as_documented():
    # nl.nc page: kernel[nl.nc(2), 2] -> NC 0: [0, 0], [0, 1]; NC 1: [1, 0], [1, 1]
    assert cores_of((nl.nc(2), 2)) == {(0, 0): 0, (0, 1): 0, (1, 0): 1, (1, 1): 1}
    # nl.spmd_dim page: kernel[nl.spmd_dim(nl.nc(2), 2), 2] -> NC 0: [0..1, *]; NC 1: [2..3, *]
    placed = cores_of((nl.spmd_dim(nl.nc(2), 2), 2))
    assert placed == {(i, j): i // 2 for i in range(4) for j in range(2)}
    # the nc factor inside: instances interleave between the cores
    placed = cores_of((nl.spmd_dim(2, nl.nc(2)), 2))
    assert placed == {(i, j): i % 2 for i in range(4) for j in range(2)}


def test_two_cores_run_their_instances_at_once_one_core_one_after_another():
    a, b = data((512, 2048)), data((512, 2048), 1)
    one = cost.estimate(nkisim.run_kernel(tiled_add[4, 1], (a, b), {})).total_ns
    two = cost.estimate(nkisim.run_kernel(tiled_add[nl.spmd_dim(nl.nc(2), 2), 1], (a, b), {})).total_ns
    single = cost.estimate(nkisim.run_kernel(tiled_add[1, 1], (a[:128], b[:128]), {})).total_ns
    assert two < 0.75 * one          # the two cores' engines and DMA queues work side by side
    # four instances on one core share its engines and queues: well over one instance's time,
    # though under four times it (an instance's DMAs overlap the one before's compute)
    assert 1.5 * single < one < 4 * single


def test_a_per_core_reduction():
    @nki.jit
    def row_sums(a):
        """Each instance sums its 128 rows into its own column of the shared output."""
        out = nl.ndarray((128, nl.num_programs()), a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        tile = nl.load(a[i * 128:(i + 1) * 128, :])
        nl.store(out[:, i:i + 1], nl.sum(tile, axis=1, keepdims=True))
        return out

    a = data((256, 300))
    run = nkisim.run_kernel(row_sums[nl.nc(2)], (a,), {})
    want = np.stack([a[:128].sum(axis=1), a[128:].sum(axis=1)], axis=1)
    np.testing.assert_allclose(run.outputs, want, rtol=1e-5)
    assert run.program.lnc == 2 and {r.attrs.get("core", 0) for r in run.trace} == {0, 1}


def test_each_instance_on_a_core_has_that_cores_on_chip_memory_to_itself():
    @nki.jit
    def big_tiles(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        # 120 KiB a partition: one instance's at a time fits the 192 KiB, two would not
        t = nisa.memset((128, 30 * 1024), 1.0, nl.float32)
        nl.store(out[:, i:i + 1], t[:, 0:1])
        return out

    got = big_tiles[3](np.zeros((128, 3), np.float32))
    np.testing.assert_array_equal(got, np.ones((128, 3), np.float32))


def test_every_entry_point_takes_a_grid():
    a, b = data((256, 64)), data((256, 64), 1)
    want = a + b
    np.testing.assert_array_equal(nki.baremetal(tiled_add)[2, 1](a, b), want)
    np.testing.assert_array_equal(nki.baremetal(tiled_add[2, 1])(a, b), want)
    np.testing.assert_array_equal(nki.simulate_kernel(tiled_add[nl.nc(2), 1], a, b), want)
    bench = nki.benchmark(warmup=1, iters=5)(tiled_add)
    np.testing.assert_array_equal(bench[2, 1](a, b), want)
    assert bench.benchmark_result.nc_latency.get_latency_percentile(50) > 0


def test_a_grid_program_round_trips_and_validates():
    a, b = data((256, 64)), data((256, 64), 1)
    program, _ = trace_kernel(tiled_add[nl.nc(2), 2], [a, b], {})
    again = programs.decode(programs.encode(program))
    programs.validate(again, HardwareLimits(), [a, b])
    assert again.lnc == 2
    from nkisim.execute import execute
    np.testing.assert_array_equal(execute(again, [a, b]).outputs, a + b)


def test_a_caller_given_launch_replaces_the_kernels_grid():
    """A grader traces at its spec's launch: the kernel object's own grid is dropped."""
    SEEN.clear()
    program, _ = trace_kernel(who_am_i[nl.nc(2), 2], [ArgSpec((128, 8), np.float32)], {}, lnc=1)
    assert SEEN == [((), 0, 1)] and program.lnc == 1


@pytest.mark.parametrize("grid, words", [
    ((nl.nc(2), nl.nc(2)), "2 nl.nc dimensions"),
    ((0, 2), "positive int"),
    ((2.0,), "positive int"),
    ((), "names no grid dimension"),
    ((nl.spmd_dim(nl.nc(2), 10 ** 9),), "2000000000 instances"),      # refused before any list of them
])
def test_malformed_grids_are_refused(grid, words):
    with pytest.raises(errors.KernelContractError, match=words):
        tiled_add[grid]


def test_nl_nc_and_spmd_dim_take_positive_sizes():
    with pytest.raises(errors.KernelContractError, match="positive int"):
        nl.nc(0)
    with pytest.raises(errors.KernelContractError, match="at least one factor"):
        nl.spmd_dim()
    with pytest.raises(errors.KernelContractError, match="positive int or nl.nc"):
        nl.spmd_dim(2, "x")


def test_too_many_cores_for_the_platform():
    a = data((256, 64))
    with pytest.raises(errors.KernelContractError, match="has 2"):
        tiled_add[nl.nc(4), 1](a, a)
    with pytest.raises(errors.KernelContractError, match="has 1"):
        nkisim.run_kernel(tiled_add[nl.nc(2), 1], (a, a), {}, settings=SimSettings(platform="trn1"))


def test_a_grid_on_a_gridded_kernel_and_inside_a_kernel_are_refused():
    with pytest.raises(errors.KernelContractError, match="already has the launch grid"):
        tiled_add[2][2]

    @nki.jit
    def outer(a, b):
        return tiled_add[2, 1](a, b)
    with pytest.raises(errors.KernelContractError, match="only the top-level launch"):
        outer(data((256, 64)), data((256, 64)))


def test_program_id_of_an_axis_the_grid_lacks():
    @nki.jit
    def third_axis(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[:, nl.program_id(2):nl.program_id(2) + 8]))
        return out
    with pytest.raises(errors.KernelContractError, match="axis the launch grid does not have"):
        third_axis[2, 2](data((128, 8)))


def test_instances_must_return_and_allocate_the_same_shared_outputs():
    @nki.jit
    def private_out(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(a))
        return out
    with pytest.raises(errors.KernelContractError, match="returned other tensors"):
        private_out[2](data((128, 8)))

    @nki.jit
    def branchy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 1:
            nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out
    with pytest.raises(errors.KernelContractError, match=r"SPMD instance \[1\] allocates more nl.shared_hbm tensors than the first instance"):
        branchy[2](data((128, 8)))


# ----- nl.all_reduce: the instances of a grid reducing one tile ------------------------------------
def reducing(op, program_axes=0, dtype=None, every_instance_stores=False):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, a.shape[1] // nl.num_programs(1)) if nl.program_ndim() > 1 else (128, a.shape[1]),
                         a.dtype if dtype is None else dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        j = nl.program_id(1) if nl.program_ndim() > 1 else 0
        width = out.shape[1]
        tile = nl.load(a[i * 128:(i + 1) * 128, j * width:(j + 1) * width]) if nl.program_ndim() > 1 else nl.load(a)
        total = nl.all_reduce(tile, op, program_axes=program_axes, dtype=dtype)
        if i == 0 and j == nl.num_programs(1) - 1 if nl.program_ndim() > 1 else True:
            nl.store(out, total)
        return out
    return kernel


@pytest.mark.parametrize("op, fold", [(nl.add, np.add), (nl.maximum, np.maximum)])
def test_all_reduce_across_the_two_cores(op, fold):
    a = data((256, 192))
    run = nkisim.run_kernel(reducing(op)[nl.nc(2), 3], (a,), {})
    np.testing.assert_array_equal(run.outputs, fold(a[:128, 128:192], a[128:, 128:192]))
    opcodes = [(r.opcode, r.attrs.get("core", 0)) for r in run.trace]
    assert opcodes.count(("sendrecv", 0)) == 3 and opcodes.count(("sendrecv", 1)) == 3


def test_all_reduce_of_one_instance_is_its_tile_in_the_dtype_asked():
    a = data((128, 64))
    got = reducing(nl.add, dtype=nl.bfloat16)(a)
    np.testing.assert_array_equal(got.astype(np.float32), a.astype(got.dtype).astype(np.float32))


def test_all_reduce_refuses_what_it_cannot_reduce():
    a = data((256, 192))
    with pytest.raises(errors.NotSimulatedError, match="cannot meet"):
        reducing(nl.add, program_axes=1)[nl.nc(2), 3](a)         # axis 1 runs on one core
    with pytest.raises(errors.UnsupportedOperationError, match="program_axes"):
        reducing(nl.add, program_axes=5)[nl.nc(2), 3](a)

    @nki.jit
    def later(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.all_reduce(nl.load(x[0:128, 0:64]), nl.add, 0, asynchronous=True))
        return out
    with pytest.raises(errors.NotSimulatedError, match="asynchronous"):
        later[nl.nc(2)](a)


def test_all_reduce_called_by_one_core_only_is_an_error():
    @nki.jit
    def lopsided(x):
        out = nl.ndarray((128, 64), x.dtype, buffer=nl.shared_hbm)
        tile = nl.load(x[0:128, 0:64])
        if nl.program_id(0) == 0:
            tile = nl.all_reduce(tile, nl.add, 0)
        nl.store(out, tile)
        return out
    with pytest.raises(errors.KernelContractError, match="ended without reaching all_reduce"):
        lopsided[nl.nc(2)](data((128, 64)))

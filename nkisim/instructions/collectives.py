"""The two physical cores of a logical NeuronCore meeting (NKI 0.6, NeuronCore-v3+, LNC=2):
core_barrier (a semaphore barrier on one engine of each core) and sendrecv (each core's SBUF
tile into the other core's). Both are points where every core of the launch meets
(nkisim.launch): the records are emitted once all cores have arrived, one per core, so every
core's instructions before the meeting precede every core's after it in the program."""
from __future__ import annotations

import itertools
import math

from ..alu import binary_op
from ..errors import KernelContractError, MemorySpaceError, NotSimulatedError, ShapeError, UnsupportedOperationError
from ..memory import Buffer
from ..registry import instruction
from ..running import current_machine
from ..trace import Engine
from .common import operand

_BARRIER_ENGINES = (Engine.GPSIMD, Engine.VECTOR, Engine.SCALAR, Engine.TENSOR, Engine.SYNC)


def _launch(m, instr: str):
    if m.launch is None or m.cores < 2:
        raise KernelContractError(
            f"nisa.{instr} synchronises the physical cores of a logical NeuronCore; this kernel runs on one",
            remedy="launch the kernel as kernel[2](...) (Trn2's LNC=2), or leave the call out",
            code="err_lnc_required")
    return m.launch


def _last_records(m, core: int, since: int) -> tuple[int, ...]:
    """The last record of each engine queue core `core` traced since program index `since`: what
    the other core's barrier waits for (its engines reached the barrier)."""
    last: dict[int, int] = {}
    for rec in m.trace[since:]:
        if rec.attrs.get("core", 0) == core:
            last[int(rec.engine)] = rec.index
    return tuple(sorted(last.values()))


@instruction("core_barrier", *_BARRIER_ENGINES, kinds=("sync",))
def core_barrier(m, data, cores=(0, 1), *, engine=Engine.GPSIMD):
    """Every core's `engine` waits until every core has reached the barrier (0.6: cores=(0, 1),
    `data` the shared-HBM tensor the barrier protects)."""
    launch = _launch(m, "core_barrier")
    if tuple(cores) != tuple(range(m.cores)):
        raise UnsupportedOperationError(f"core_barrier synchronises cores {tuple(range(m.cores))}, got {cores!r}",
                                        remedy=f"pass cores={tuple(range(m.cores))}", code="err_unsupported_args")
    operand(data, "core_barrier", "data", (Buffer.SHARED_HBM, Buffer.HBM), tile=False)
    eng = Engine(engine)
    if eng not in _BARRIER_ENGINES:
        raise UnsupportedOperationError(f"core_barrier blocks a compute or sync engine, got {eng.label}",
                                        code="err_instruction_engine_unsupported")
    since = launch.barrier_since

    def complete(arrivals: dict) -> None:
        for core in sorted(arrivals):
            waits = tuple(j for other in arrivals if other != core for j in _last_records(m, other, since))
            m.switch_core(core)
            rec = m.emit("core_barrier", arrivals[core], "sync", [], [])
            if waits:
                rec.attrs["after"] = waits
        launch.barrier_since = len(m.trace)
    launch.meet("core_barrier", eng, complete)


@instruction("sendrecv", Engine.DMA, Engine.GPSIMD, kinds=("copy",))
def sendrecv(m, src, dst, send_to_rank, recv_from_rank, pipe_id, *, gpsimd_dma=False):
    """This core's `src` into the peer's `dst`, and the peer's `src` into this core's `dst`:
    both SBUF tiles of the same dtype and shape."""
    launch = _launch(m, "sendrecv")
    for t, param in ((src, "src"), (dst, "dst")):
        operand(t, "sendrecv", param, (Buffer.SBUF,))
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise ShapeError(f"sendrecv moves src {src._label()} into the peer's dst: they must have the same shape "
                         f"and dtype, got dst {dst._label()}", code="err_param_shape_mismatch")
    for rank, param in ((send_to_rank, "send_to_rank"), (recv_from_rank, "recv_from_rank")):
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < m.cores or rank == m.core:
            raise UnsupportedOperationError(f"{param} of sendrecv on core {m.core} must name the other core, got "
                                            f"{rank!r}", code="err_unsupported_args")
    m.check_writable(dst, "sendrecv destination")
    if gpsimd_dma:
        _gpsimd_dma_limit(src)
    mine = (src, dst, send_to_rank, recv_from_rank, pipe_id)

    def complete(arrivals: dict) -> None:
        for core, (s, _, to, frm, pipe) in sorted(arrivals.items()):
            peer_dst, peer_from, peer_pipe = arrivals[to][1], arrivals[to][3], arrivals[to][4]
            if peer_from != core or peer_pipe != pipe:
                raise KernelContractError(
                    f"core {core} sends to core {to} on pipe {pipe!r}, which receives from core {peer_from} on pipe "
                    f"{peer_pipe!r}: the two sendrecv calls must pair up", code="err_lnc_control_flow",
                    remedy="make each core's send_to_rank the other's recv_from_rank, with the same pipe_id")
            m.switch_core(core)
            m.emit("sendrecv", Engine.GPSIMD if gpsimd_dma else Engine.DMA, "copy", [s], [peer_dst])
    launch.meet("sendrecv", mine, complete)


def _gpsimd_dma_limit(src) -> None:
    """NKI 0.6: gpsimd_dma moves at most 1024 (32-bit), 512 (16-bit) or 256 (8-bit) bytes a partition."""
    limit = {4: 1024, 2: 512, 1: 256}.get(src.dtype.itemsize, 1024)
    per_partition = src.size // max(src.shape[0], 1) * src.dtype.itemsize
    if per_partition > limit:
        raise MemorySpaceError(f"sendrecv over the GpSimd DMA moves at most {limit} bytes a partition of "
                               f"{src.dtype.name}, got {per_partition}", remedy="use dma_engine=nisa.dma_engine.dma",
                               code="err_size_of_dimension_exceed_arch_limit")


# ----- nl.all_reduce (SDK 2.26): the instances of an SPMD grid reducing one tile -------------------

def _reduced_axes(program_axes, ndim: int) -> tuple[int, ...]:
    axes = program_axes if isinstance(program_axes, tuple) else (program_axes,)
    if not axes or any(isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < max(ndim, 1) for a in axes):
        raise UnsupportedOperationError(f"program_axes of nl.all_reduce names grid axes 0..{max(ndim, 1) - 1}, got "
                                        f"{program_axes!r}", remedy="pass an axis of the launch grid, or a tuple of them",
                                        code="err_program_id_axis_out_of_bounds")
    return tuple(sorted(set(axes)))


def all_reduce(x, op, program_axes, *, dtype=None, mask=None, parallel_reduce=True, asynchronous=False):
    """nl.all_reduce: every instance of the launch grid gets `op` over the x of the instances that
    differ from it only along `program_axes`. Lowered onto the table's instructions: each core's
    x into the other core's SBUF (a sendrecv record), then a tensor_tensor of the two on each
    core (their cost is those records'; the compiler's own lowering is not documented). The
    instances reduced together must run on different physical cores (the axes an nl.nc
    dimension places): instances of one core run one after another, so they never meet."""
    from .vector import tensor_copy, tensor_tensor    # the Vector engine's table functions
    m = current_machine()
    operand(x, "all_reduce", "x")
    alu = binary_op(op, "all_reduce")
    if type(parallel_reduce) is not bool:
        raise UnsupportedOperationError(f"parallel_reduce of nl.all_reduce is True or False, got {parallel_reduce!r}",
                                        code="err_unsupported_args")
    if asynchronous is not False:
        raise NotSimulatedError("nl.all_reduce(asynchronous=True) returns before the reduction and needs a "
                                "synchronisation nkisim does not simulate", remedy="leave asynchronous unset")
    sizes = m.grid_sizes
    axes = _reduced_axes(program_axes, len(sizes))
    group = math.prod(sizes[a] for a in axes) if sizes else 1
    if group == 1:                                   # one instance reduces with itself
        return tensor_copy(x, dtype=dtype, mask=mask)
    if m.grid is None or group != m.cores or not _across_cores(m.grid, axes):
        raise NotSimulatedError(
            f"nl.all_reduce over grid axes {axes} reduces {group} instances, which do not run on {group} different "
            "physical cores: nkisim runs a core's instances one after another, so they cannot meet",
            remedy="put the reduced axis on the cores: launch as kernel[nl.nc(2), ...] and reduce over axis 0")
    scratch = m.allocate(tuple(x.shape), x.dtype, Buffer.SBUF, name="all_reduce peer tile")
    mine = {"x": x, "scratch": scratch, "ids": m.program_ids, "result": None}

    def complete(arrivals: dict) -> None:
        kept = [i for i in range(len(sizes)) if i not in axes]
        if len({tuple(a["ids"][i] for i in kept) for a in arrivals.values()}) != 1 or \
                len({(tuple(a["x"].shape), a["x"].dtype) for a in arrivals.values()}) != 1:
            raise KernelContractError("the instances meeting at an nl.all_reduce are not one reduction group, or "
                                      "bring tiles of different shapes: every instance must call the same "
                                      "all_reduces in the same order", code="err_lnc_control_flow")
        for core, a in sorted(arrivals.items()):
            for other, b in sorted(arrivals.items()):
                if other != core:
                    m.switch_core(core)
                    m.emit("sendrecv", Engine.DMA, "copy", [a["x"]], [b["scratch"]])
        for core, a in sorted(arrivals.items()):
            m.switch_core(core)
            a["result"] = tensor_tensor(a["x"], a["scratch"], alu, dtype=dtype, mask=mask)
    m.launch.meet("all_reduce", mine, complete)
    return mine["result"]


def _across_cores(grid, axes: tuple[int, ...]) -> bool:
    """Whether every reduction group of `grid` along `axes` has its instances on distinct cores."""
    groups: dict[tuple, set] = {}
    for flat, ids in enumerate(itertools.product(*(range(n) for n in grid.sizes))):
        key = tuple(v for i, v in enumerate(ids) if i not in axes)
        cores = groups.setdefault(key, set())
        if grid.core_of[flat] in cores:
            return False
        cores.add(grid.core_of[flat])
    return True

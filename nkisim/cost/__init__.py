"""The latency model: cost rules per instruction (rules.py), their constants (params.py, Trainium2's),
each NeuronCore generation's differences from them (generations.py), and a scheduler that turns a
kernel's trace into an engine timeline (scheduler.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import dtypes as _dtypes
from .params import DEFAULT_PARAMS, CostParams
from .generations import GENERATIONS, generation, params_for
from .rules import COST_RULES
from .dependencies import hazards
from .merge import adjacent_dma_groups, merge_trace
from .scheduler import Timeline, schedule

__all__ = ["CostParams", "DEFAULT_PARAMS", "GENERATIONS", "generation", "params_for", "COST_RULES", "Timeline",
           "schedule", "estimate", "time_trace", "uses_dge", "latency_samples_us"]


def uses_dge(compile_options: dict) -> bool:
    """The default DMA mode issues every dma_copy through the DGE; --disable-dge prebuilds."""
    return "--disable-dge" not in str(compile_options.get("additional_compile_opt") or "")


def estimate(run, params: CostParams | None = None, *, measurement: str = "bench") -> Timeline:
    """Timeline of a KernelRun, by its platform's generation unless `params` are given.
    `measurement` picks the fixed overhead: "bench" for nki.benchmark's NeuronCore latency,
    "profile" for neuron-profile's total_time."""
    if params is None:
        params = params_for(run.settings.platform)
    overhead = params.bench_overhead_ns if measurement == "bench" else params.profile_overhead_ns
    return time_trace(run.trace, getattr(run.program, "allocs", None) or [], dge=uses_dge(run.compile_options),
                      params=params, overhead_ns=overhead, limits=run.settings.limits)


def time_trace(trace, allocs, *, dge: bool, params: CostParams = DEFAULT_PARAMS, overhead_ns: float | None = None,
               limits=None) -> Timeline:
    """The timeline of an executed trace whose allocation table is `allocs` (nkisim.trace.
    AllocInfo): adjacent DMAs merged, hazards found, then scheduled. What nki.benchmark, the
    grader and `nkisim profile` all time. A generation without hardware DGE (NC-v2) prebuilds
    every DMA's descriptors whatever the compile options asked."""
    dge = dge and params.hardware_dge
    tracked = hazard_tracked(allocs, params, limits)
    groups = adjacent_dma_groups(trace) if params.dma_merge_adjacent else []
    merged = trace
    if groups:
        merged, owner = merge_trace(trace, groups)
    timeline = schedule(merged, params, dge=dge, overhead_ns=overhead_ns,
                        hazard_deps=hazards(merged, tracked) if tracked else None)
    return expand_merged(timeline, owner) if groups else timeline


def expand_merged(timeline: Timeline, owner: list[int]) -> Timeline:
    """A timeline with one slot per record of the original trace: a merged DMA's first record
    carries it, the others ride along (no issue time or DMA engines of their own)."""
    slots, seen = [], set()
    for o in owner:
        slot = timeline.slots[o]
        if o in seen:
            slot = dataclasses.replace(slot, issue_queue="", issue_end=slot.issue_start, dma_queues=(),
                                       engines=0, hazard_wait=0.0)
        seen.add(o)
        slots.append(slot)
    return dataclasses.replace(timeline, slots=slots)


def hazard_tracked(allocs, params: CostParams, limits=None) -> dict[int, int]:
    """{allocation id: write granule in elements} of the memory whose reuse stalls: all of HBM,
    and on-chip tiles too large for the compiler to rename (fewer than `onchip_rename_copies`
    copies fit in SBUF or PSUM; granule: one element)."""
    if limits is None:
        from ..settings import SimSettings
        limits = SimSettings().limits
    tracked = {}
    for a in allocs:
        item = 2 if a.dtype == "bfloat16" else _dtypes.to_dtype(a.dtype).itemsize     # NKI names (the x4 MX types too)
        if a.buffer in ("hbm", "shared_hbm"):
            tracked[a.id] = max(1, params.dma_hazard_granule_bytes // item)  # 0: exact
            continue
        parts = a.shape[a.par_axis] if a.shape else 1
        per_partition = int(np.prod(a.shape, dtype=np.int64)) // max(parts, 1) * item
        capacity = limits.sbuf_partition_bytes if a.buffer == "sbuf" else limits.psum_bank_bytes * limits.psum_banks
        if per_partition * params.onchip_rename_copies > capacity:
            tracked[a.id] = 1
    return tracked


def latency_samples_us(timeline: Timeline, iters: int, sigma: float, seed: int) -> np.ndarray:
    """Per-iteration latencies: the estimate itself, or with multiplicative log-normal noise of
    standard deviation `sigma` (SimSettings.latency_noise) to mimic run-to-run jitter."""
    base = timeline.total_us
    if sigma <= 0:
        return np.full(max(iters, 1), base)
    rng = np.random.default_rng(seed)
    return base * rng.lognormal(0.0, sigma, size=max(iters, 1))

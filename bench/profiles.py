"""The cost model against measured Trainium2 profiles, instruction by instruction.

Data: /work/shared/data/trn2-profiles/ (README.md: decoded neuron-profile traces of 26 kernels,
static-descriptor builds). For each profile a calibration kernel of the same structure
(bench/profile_kernels.py, reference_kernels/) runs in the simulator; `cost.estimate(run,
measurement="profile")` gives its Timeline. The same statistics are computed on both sides and
printed with the ratio model / hardware:

* structure: instructions per engine and opcode against the nkisim kinds they map to (OPCODES),
  DMA triggers and descriptors per queue (a mismatch of structure shows here, it is not hidden);
* per engine and kind: count, median duration, median issue interval (start to start of
  consecutive instructions of that kind on one engine), busy time (union of intervals);
* matmul issue interval by moving free size and dtype (the README's first fact), DVE
  tensor_tensor duration against elements;
* DMA descriptors: count, bytes, median duration by queue and size, concurrency;
* totals: total_time against the model's total, kernel span against its makespan;
* a summary: per profile the median of per-instruction ratios for matmuls, Vector/Scalar
  instructions and DMA descriptors (target within 15%) and the totals (target within 10%);
* Vector/Scalar occupancy: DVE and ACT pipeline their instructions (one starts while the last
  is still running), so besides the duration (a latency) the completion spacing of such
  back-to-back instructions is compared with the time the model's cost rule holds the queue.

    python bench/profiles.py [--all-runs] [--skip-224]
    python bench/profiles.py --platform trn1 [--all-runs]

--platform trn1: the Trainium1 (NeuronCore-v2) model (SimSettings(platform="trn1"), so
cost.params_for("trn1")) against the 12 profiles of /work/shared/data/trn1-profiles/, all of the
part-1 vector add (fd1k: 2 tiles of 128 x 1000 fp32, fd2k: 1 tile of 128 x 2000). Their DMA rows
have no queued time (README), so the DMAs are compared ring by ring instead: a descriptor's
data->data spacing, a DMA's time on a ring when the ring was backlogged, and the timeline's
phases (trigger, first data, last semaphore write, the consumer's start) with the constants they
measure. PE and ACT run only their b1 marker there and every profile is fp32: what that leaves
unchecked is printed, not compared.

A measuring instrument like bench/fidelity.py: it asserts nothing and exits 0.

What a hardware "duration" is: start->end of one instruction, a latency (the README: on PE
instructions overlap). What the model's is: the slot's end - start, for the PE the occupancy of
its in-order queue, for DVE and ACT the latency (the occupancy its queue is held for, then the
engine's pipeline time: nkisim.cost.rules.pipeline_ns). So matmuls are compared on issue
interval (occupancy when back to back), DVE and ACT instructions on duration, latency against
latency, and on occupancy where the hardware ran them back to back (the V/S occ column).
"""
from __future__ import annotations

import argparse
import bisect
import collections
import gzip
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nkisim  # noqa: E402

nkisim.install()

from nkisim.settings import SimSettings  # noqa: E402

from nkisim import cost  # noqa: E402
from nkisim.cost.rules import COST_RULES, DmaCost, copy_ns  # noqa: E402
from nkisim.cost.profile import interval_union  # noqa: E402
from nkisim.cost.scheduler import engine_ns, engines_used  # noqa: E402
from bench import profile_kernels  # noqa: E402
from reference_kernels import calibration, vector_add  # noqa: E402

DATA_DIRS = {"trn2": "/work/shared/data/trn2-profiles", "trn1": "/work/shared/data/trn1-profiles"}
DATA = DATA_DIRS["trn2"]
STATIC = {"additional_compile_opt": "--disable-dge"}

# ----- the profiles' opcodes and queues against nkisim's instruction kinds -------------------
# (engine, opcode) -> (nkisim kinds it is compared with, status, the evidence). Status: the
# README's label (certain / inferred / unknown); "bench:" marks an identification this bench
# makes from instruction counts, not the README's.
OPCODES = {
    ("PE", "0x02"): (("nc_matmul", "nc_transpose"), "certain",
                     "matmul on the moving operand; the PE transposes are 0x02 too (36 / 64 at moving free 128)"),
    ("PE", "0x01"): ((), "inferred", "precedes every matmul: probably the stationary load; nkisim folds it into "
                                     "nc_matmul (no instruction of its own)"),
    ("DVE", "0x41"): (("tensor_tensor",), "certain", "tensor_tensor (vector add)"),
    ("DVE", "0x42"): (("tensor_reduce",), "unknown", "bench: max reduce (60 at pool 1 of ~14 el., 30 at pool 2 of ~28)"),
    ("DVE", "0x46"): (("tensor_copy",), "unknown", "bench: copy without dtype change (36 weight-transpose evictions, "
                                                   "64 transpose evictions in run e, 60 more accumulator copies in fp32)"),
    ("DVE", "0x47"): (("tensor_copy",), "unknown", "bench: PSUM fp32 -> SBUF fp16 copy (60, fp16 only; 0x46 in fp32)"),
    ("ACT", "0x46"): (("tensor_copy",), "unknown", "bench: copy on ACT (the 64 PSUM evictions of P3, trn2-cost-model.md "
                                                   "s4; conv-c/d: the share of 36 unplaced SBUF copies)"),
    ("ACT", "0x23"): ((), "unknown", "bench: once before the first ACT compute instruction (an ACT table load?); "
                                     "no nkisim counterpart"),
    ("SP", "0xa5"): (("dma_issue",), "unknown", "bench: one per DMA on qSPIO0/qSPSpillReload0 (0xa0-0xb1: "
                                                "runtime/control, README); nkisim: the static issue queue"),
    ("POOL", "0xa5"): (("dma_issue",), "unknown", "bench: one per store DMA on qPoolIO0"),
}
CONTROL = "0xa0-0xb1 other than 0xa5 (semaphore wait 0xa0, branch 0xa9, marker 0xb1, 0xa4): runtime/control, " \
          "no nkisim counterpart (README)"
# DMA queues of the profiles -> the nkisim DMAs compared with them (by direction)
DMA_QUEUES = {
    "qSPIO0": ("HBM->SBUF loads, HBM->HBM copies", "certain: loads on qSPIO0 (Sync), trn2-cost-model.md s2 (NEFFs)"),
    "qPoolIO0": ("SBUF->HBM stores", "certain: stores on qPoolIO0 (GpSimd), trn2-cost-model.md s2 (NEFFs)"),
    "qSPSpillReload0": ("dma_transpose; the PE transposes' 128x128 identity (no nkisim DMA)",
                        "bench: 576 x 2 KiB = the weights again in conv-c/d; 128 rows of one tile where PE transposes run"),
}


def model_dma_queue(rec) -> str:
    if rec.opcode == "dma_transpose":
        return "qSPSpillReload0"
    return "qPoolIO0" if rec.writes and rec.writes[0].buffer in ("hbm", "shared_hbm") \
        and rec.reads[0].buffer not in ("hbm", "shared_hbm") else "qSPIO0"


# ----- profiles and their calibration kernels -------------------------------------------------

def conv_inputs(h, w, dtype, seed=4):
    rng = np.random.default_rng(seed)
    return (rng.random((1, 256, h, w), dtype=np.float32).astype(dtype),
            rng.random((256, 256, 3, 3), dtype=np.float32).astype(dtype),
            rng.random(256, dtype=np.float32).astype(dtype))


def calibration_for(pid: str):
    """(kernel, inputs, where the kernel comes from) of one profile."""
    if pid.startswith("part1-vadd"):
        fd = 1000 if "fd1k" in pid else 2000
        v = np.random.default_rng(1).random(256000, dtype=np.float32)
        return vector_add.make_vector_add_stream(fd), (v, v.copy()), f"vector_add_stream({fd})"
    if pid.startswith("part1-transpose"):
        m = np.random.default_rng(2).random((1024, 1024), dtype=np.float32)
        if pid.endswith("-e"):
            return profile_kernels.transpose_per_tile_dve, (m,), "profile_kernels.transpose_per_tile_dve"
        return calibration.transpose_per_tile, (m,), "calibration.transpose_per_tile"
    _, letter, dtype, image, pool = pid.split("-")
    h, w = map(int, image.split("x"))
    inputs = conv_inputs(h, w, {"fp16": "float16", "fp32": "float32"}[dtype])
    if letter in "ab":
        kern = profile_kernels.conv_tiny_matmuls_pool1 if pool == "pool1" else profile_kernels.conv_tiny_matmuls_pool2
        return kern, inputs, f"profile_kernels.conv_tiny_matmuls_{pool}"
    return profile_kernels.conv_hbm_gather_dma_transpose, inputs, "profile_kernels.conv_hbm_gather_dma_transpose"


# ----- statistics -----------------------------------------------------------------------------

union = interval_union     # the busy time a hardware profile shows: one definition, nkisim's


def med(xs):
    return float(np.median(xs)) if len(xs) else math.nan


def intervals_of(starts) -> list[float]:
    s = sorted(starts)
    return [b - a for a, b in zip(s, s[1:])]


def time_weighted(intervals, span: float) -> tuple[float, int]:
    """(mean over [0, span], max) of how many of `intervals` are open at once."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    level = peak = 0
    area, last = 0.0, 0.0
    for t, d in events:
        t = min(max(t, 0.0), span)
        area += level * (t - last)
        last = t
        level += d
        peak = max(peak, level)
    return area / span if span > 0 else math.nan, peak


class Instr:
    """One instruction on either side: engine, kind, class key, start, end."""
    __slots__ = ("engine", "kind", "key", "start", "end", "elements", "dtype", "occ")

    def __init__(self, engine, kind, start, end, elements=None, dtype=None, key=None, occ=None):
        self.engine, self.kind, self.start, self.end = engine, kind, start, end
        self.elements, self.dtype, self.key = elements, dtype, key
        self.occ = occ          # model: the time the instruction holds its engine (its cost rule)


class Desc:
    __slots__ = ("queue", "nbytes", "queued", "data", "done", "engine", "service", "tail")

    def __init__(self, queue, nbytes, queued=None, data=None, done=None, engine=None, service=None, tail=None):
        self.queue, self.nbytes, self.queued, self.data, self.done = queue, nbytes, queued, data, done
        self.engine, self.service, self.tail = engine, service, tail


class DmaClass:
    """The model's DMAs of one source line and shape: how many, their descriptors (contiguous
    runs), and the DMA engines' time per byte (chunk / bytes per engine)."""

    def __init__(self, queue):
        self.queue, self.dmas, self.nbytes, self.runs = queue, 0, 0, 0
        self.ns_per_byte, self.tail, self.waits = 0.0, 0.0, []

    def add(self, nbytes, runs, ns_per_byte, tail, wait):
        self.dmas += 1
        self.nbytes += nbytes
        self.runs += runs
        self.ns_per_byte, self.tail = ns_per_byte, tail
        self.waits.append(wait)


class ModelDma:
    """One of the model's DMAs: its queue (as model_dma_queue names it), issue, transfer start,
    per-engine time (chunk), end (chunk + end latency), bytes and DMA engines."""
    __slots__ = ("queue", "issue_start", "issue_end", "start", "chunk", "end", "nbytes", "engines")

    def __init__(self, queue, issue_start, issue_end, start, chunk, end, nbytes, engines):
        self.queue, self.issue_start, self.issue_end, self.start = queue, issue_start, issue_end, start
        self.chunk, self.end, self.nbytes, self.engines = chunk, end, nbytes, engines


DTYPE_CODE = {7: "fp16", 10: "fp32"}


class Side:
    """The statistics' inputs of one side (hardware or model)."""

    def __init__(self, name):
        self.name = name
        self.instrs: list[Instr] = []
        self.descs: list[Desc] = []
        self.dma_issue: list[Instr] = []
        self.total_us = self.span_us = math.nan
        self.notes: list[str] = []
        self.dma_intervals: list[tuple[float, float]] = []   # what is "in flight" on this side
        self.engine_busy: dict = {}
        self.dma_classes: dict = {}
        self.dmas: list[ModelDma] = []     # model: each DMA that moved bytes, in program order


    def by(self, engine=None, kind=None, key=None):
        return [i for i in self.instrs if (engine is None or i.engine == engine) and (kind is None or i.kind == kind)
                and (key is None or i.key == key)]


def load_hardware(pid: str, data: str = DATA) -> tuple[Side, dict]:
    side = Side("hw")
    with gzip.open(os.path.join(data, pid + ".jsonl.gz"), "rt") as fh:
        meta = json.loads(fh.readline())
        rows = [json.loads(line) for line in fh]
    span = meta["kernel_span_us"] * 1e3
    side.total_us, side.span_us = meta["total_time_us"], meta["kernel_span_us"]
    for r in rows:
        if r["kind"] == "instr" and r.get("in_kernel"):
            op, eng = r["opcode"], r["engine"]
            kind = "0x" + op[2:]
            elements = r.get("moving_free") or r.get("in0_free") or r.get("free_heuristic")
            dtype = DTYPE_CODE.get(r.get("dtype_code"), None)
            if op == "0x41":
                dtype = "fp16" if max(r.get("in0_dtype", 0), r.get("out_dtype", 0)) == 7 else "fp32"
            ins = Instr(eng, kind, r["start_ns"], r["end_ns"], elements, dtype)
            if op == "0xa5":
                side.dma_issue.append(ins)
            side.instrs.append(ins)
        elif r["kind"] == "dma" and r.get("data_ns") is not None and 0 <= r["data_ns"] <= span:
            d = Desc(r["queue"], r["bytes"], r["queued_ns"], r["data_ns"], r["done_ns"], r["dma_engine"])
            side.descs.append(d)
            # trn1: no queued time (README), so what is in flight starts at the data event
            side.dma_intervals.append((d.data if d.queued is None else d.queued, d.done))
    return side, meta


def model_side(kernel, inputs, platform: str = "trn2") -> tuple[Side, object, object]:
    side = Side("model")
    if platform == "trn2":
        run = nkisim.run_kernel(kernel, inputs, {}, compile_options=STATIC)
    else:   # NC-v2 has no DGE: the model prebuilds every DMA whatever the options (cost.time_trace)
        run = nkisim.run_kernel(kernel, inputs, {}, settings=SimSettings(platform=platform))
    tl = cost.estimate(run, measurement="profile")
    p = tl.params
    side.total_us, side.span_us = tl.total_us, tl.makespan_ns / 1e3
    engine_intervals = []
    for rec, slot in zip(run.trace, tl.slots):
        c = COST_RULES[rec.opcode](rec, p)
        if isinstance(c, DmaCost):
            q = model_dma_queue(rec)
            if slot.issue_queue:
                side.dma_issue.append(Instr("POOL" if q == "qPoolIO0" else "SP", "dma_issue", slot.issue_start,
                                            slot.issue_end))
            k = engines_used(c, p)
            chunk = engine_ns(c, p, k)
            cls = side.dma_classes.setdefault((q, rec.opcode, str(rec.site), c.nbytes, c.descriptors), DmaClass(q))
            cls.add(c.nbytes, c.descriptors, chunk / (c.nbytes / k), p.dma_end_latency_ns, slot.start - slot.issue_end)
            for _ in range(c.descriptors):
                side.descs.append(Desc(q, c.nbytes / c.descriptors))
            if slot.engines:       # a merged DMA's riders carry no transfer of their own
                engine_intervals.append((slot.start, slot.start + chunk, slot.engines, slot.dma_queues))
                side.dma_intervals.append((slot.issue_end, slot.end))
                side.dmas.append(ModelDma(q, slot.issue_start, slot.issue_end, slot.start, chunk, slot.end,
                                          c.nbytes, slot.engines))
            continue
        a = rec.attrs
        dtype = None
        elements = max((r.elements_per_partition for r in rec.reads), default=0)
        if rec.opcode == "nc_matmul":
            elements = a["n"]
            dtype = "fp32" if "float32" in (a["dtype"], a["moving_dtype"]) else "fp16"
        elif rec.opcode == "nc_transpose":
            elements = a["f"]
            dtype = "fp32" if a["dtype"] == "float32" else "fp16"
        elif rec.writes:
            dtype = "fp16" if rec.writes[0].dtype in ("float16", "bfloat16") else "fp32"
        key = None
        if rec.opcode == "tensor_copy" and rec.reads and rec.writes:
            key = "cast" if rec.reads[0].dtype != rec.writes[0].dtype else "same"
        occ = copy_ns(rec, slot.queue, p) if rec.opcode == "tensor_copy" and slot.queue in ("DVE", "ACT") else c.ns
        side.instrs.append(Instr(slot.queue, rec.opcode, slot.start, slot.end, elements, dtype, key, occ))
    side.engine_busy = engine_intervals
    return side, run, tl


# ----- matching a hardware instruction to the model's instructions of the same kind ----------

def model_kinds(engine: str, opcode: str) -> tuple[tuple[str, ...], str | None]:
    kinds = OPCODES.get((engine, opcode), ((),))[0]
    key = {"0x47": "cast", "0x46": "same"}.get(opcode) if "tensor_copy" in kinds else None
    return kinds, key


def nearest(values: dict, x):
    """The entry of {size: value} whose size is nearest to x (log distance)."""
    if not values:
        return None, None
    if x is None or x <= 0:
        k = max(values, key=lambda s: values[s][1])
        return k, values[k][0]
    k = min(values, key=lambda s: abs(math.log(max(s, 1e-9) / x)))
    return k, values[k][0]


def class_medians(instrs, metric) -> dict:
    """{elements: (median metric, count)}."""
    groups = collections.defaultdict(list)
    for i in instrs:
        v = metric(i)
        if v is not None:
            groups[i.elements].append(v)
    return {k: (med(v), len(v)) for k, v in groups.items()}


def with_intervals(instrs):
    """[(instr, interval to the next instruction of the same kind on its engine)]."""
    out, groups = [], collections.defaultdict(list)
    for i in instrs:
        groups[(i.engine, i.kind)].append(i)
    for g in groups.values():
        g.sort(key=lambda i: i.start)
        out += [(a, b.start - a.start) for a, b in zip(g, g[1:])]
    return out


def ratio(a, b):
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def fmt(x, w=8, d=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return f"{'-':>{w}}"
    return f"{x:{w}.{d}f}"


def fr(x, w=6):
    return f"{'-':>{w}}" if x is None or math.isnan(x) else f"{x:{w}.2f}"


# ----- Vector/Scalar occupancy: what a busy engine's throughput is --------------------------

def backlogged_spacing(instrs) -> list[tuple]:
    """[(instr, completion spacing)] for each compute instruction that started while the one
    before it on its engine was still running: the hardware pipelines DVE and ACT instructions
    (start->end is a latency), so such an instruction's end minus the previous end is the time
    it held the engine, or an upper bound where a producer on another engine paced it."""
    out = []
    for eng in ("DVE", "ACT"):
        s = sorted((i for i in instrs if i.engine == eng and int(i.kind, 16) < 0xa0), key=lambda i: i.start)
        out += [(b, b.end - a.end) for a, b in zip(s, s[1:]) if b.start < a.end]
    return out


def vector_scalar_occupancy(hw, mo, prof_dtype, out) -> tuple[float, int]:
    """Median over backlogged hardware instructions of model occupancy / hardware spacing."""
    groups = collections.defaultdict(list)
    for i, spacing in backlogged_spacing(hw.instrs):
        groups[(i.engine, i.kind, i.elements, i.dtype or prof_dtype)].append(spacing)
    if not groups:
        return math.nan, 0
    out("Vector/Scalar occupancy: hw completion spacing of instructions issued while the previous one on the engine")
    out("  was still running (an upper bound where another engine paces them), against the model's cost-rule time")
    out("  (the time its queue is held) for the same kind, nearest elements:")
    ratios = []
    for (eng, op, el, dt), spc in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        kinds, key = model_kinds(eng, op)
        m = [i for i in mo.instrs if i.kind in kinds and i.engine in ("DVE", "ACT") and i.occ is not None
             and (key is None or i.key == key)]
        same = [i for i in m if i.engine == eng] or m
        if not same:
            continue
        cls = collections.defaultdict(list)
        for i in same:
            cls[(i.elements, i.dtype, i.engine)].append(i.occ)
        mk = min(cls, key=lambda k: (abs(math.log(max(k[0], 1) / max(el or 1, 1))), k[1] != dt))
        mocc = med(cls[mk])
        ratios += [mocc / v for v in spc if v > 0]
        out(f"  {eng:4} {op:5} {el or 0:5} {dt:5} n={len(spc):<4d} hw spacing {fmt(med(spc), 7)} | model {mk[2]:4} "
            f"{mk[0]:5} el. {fmt(mocc, 7)} | {fr(ratio(mocc, med(spc)), 5)}")
    return med(ratios), len(ratios)


# ----- Trainium1: DMAs by ring and the timeline's phases (the trn1 rows have no queued time) ---

README_DVE_FIT = {"trn2": (161.8, 1.038), "trn1": (212.6, 1.804)}   # each README's least squares: ns, ns/el.
TRIGGER_ENGINE = {"qSPIO0": "SP", "qPoolIO0": "POOL"}   # whose 0xa5 queues each queue's DMAs (trn1 README)


class HwDma:
    """A DMA of the trn1 profiles: on each ring (DMA engine) its data descriptors, then the
    4-byte semaphore write that ends it there (README: a separate descriptor after each DMA's
    data on each queue). The k-th DMA of a queue is taken to be the one the k-th 0xa5 of its
    trigger engine queued: inferred from the order, as the README leaves undecoded which NEFF
    DMA queued a descriptor."""

    def __init__(self, queue: str, k: int):
        self.queue, self.k = queue, k
        self.rings: dict[int, tuple[list[Desc], Desc]] = {}
        self.trigger: Instr | None = None

    @property
    def ring_bytes(self) -> float:
        return med([sum(d.nbytes for d in ds) for ds, _ in self.rings.values()])

    @property
    def nbytes(self) -> int:
        return sum(d.nbytes for ds, _ in self.rings.values() for d in ds)

    @property
    def first_data(self) -> float:
        return med([ds[0].data for ds, _ in self.rings.values() if ds])

    @property
    def sem_done(self) -> float:
        return med([s.done for _, s in self.rings.values()])

    @property
    def end(self) -> float:          # what the DMA's consumer waits for: every ring's semaphore write
        return max(s.done for _, s in self.rings.values())


def hw_dmas(hw: Side) -> tuple[list[HwDma], int]:
    """The profile's DMAs by queue and order, and how many data descriptors no semaphore write
    closed (0 in every trn1 file: then each queue's DMAs are whole)."""
    rings = collections.defaultdict(list)
    for d in hw.descs:
        rings[(d.engine, d.queue)].append(d)
    dmas, loose = {}, 0
    for (engine, queue), ds in rings.items():
        ds.sort(key=lambda d: d.data)
        k, cur = 0, []
        for d in ds:
            if d.nbytes <= 4:
                dmas.setdefault((queue, k), HwDma(queue, k)).rings[engine] = (cur, d)
                k, cur = k + 1, []
            else:
                cur.append(d)
        loose += len(cur)
    triggers = {q: sorted(hw.by(e, "0xa5"), key=lambda i: i.start) for q, e in TRIGGER_ENGINE.items()}
    for (queue, k), dma in dmas.items():
        found = triggers.get(queue, [])
        dma.trigger = found[k] if k < len(found) else None
    return sorted(dmas.values(), key=lambda d: (d.queue, d.k)), loose


def backlogged_ring_times(dmas: list[HwDma]) -> dict[tuple[str, float], list[float]]:
    """{(queue, bytes a ring moves): [ns]}: a DMA's time on a ring that was still busy with the
    queue's previous DMA when it was triggered, from one semaphore write there to the next."""
    found = collections.defaultdict(list)
    by_queue = collections.defaultdict(list)
    for d in dmas:
        by_queue[d.queue].append(d)
    for queue, ds in by_queue.items():
        for a, b in zip(ds, ds[1:]):
            if b.trigger is None:
                continue
            for ring, (data, sem) in b.rings.items():
                prev = a.rings.get(ring)
                if prev is not None and b.trigger.end <= prev[1].done:
                    found[(queue, sum(x.nbytes for x in data))].append(sem.done - prev[1].done)
    return found


def model_class(mo: Side, queue: str, nbytes: float):
    """The model's DMA class on `queue` nearest in bytes a DMA moves (None: no DMA there)."""
    classes = [c for c in mo.dma_classes.values() if c.queue == queue]
    return min(classes, key=lambda c: abs(math.log(c.nbytes / c.dmas / nbytes))) if classes else None


def dma_rings(hw: Side, mo: Side, out) -> tuple[float, int, float, int]:
    """trn1: per descriptor, the ring's time per descriptor (data->data of consecutive ones of a
    DMA) against the model's DMA-engine time for its bytes; per DMA, its time on a backlogged
    ring against the model's per-engine time (chunk). Returns (median ratio, n) of each."""
    dmas, loose = hw_dmas(hw)
    out("DMA descriptors by ring (no queued time in these rows). hw per queue and size: data->done (d-d), the")
    out("  ring's previous done -> data (pd-d), and the data->data spacing of consecutive descriptors of one DMA")
    out("  on one ring (spc: the ring's time per descriptor). model: the class of DMAs (same queue, nearest bytes")
    out("  a DMA), its descriptors (contiguous runs) and run bytes, and its DMA engines' time for the hw")
    out("  descriptor's bytes; the 4-byte semaphore writes have no model part:")
    out(f"  {'queue':10} {'bytes':>6} {'hw n':>5} {'d-d':>7} {'pd-d':>7} {'spc':>7} | {'DMAs':>4} {'runs':>6} "
        f"{'run B':>6} {'time':>7} | {'time/spc':>8}")
    by_size, prev_done, spacing = collections.defaultdict(list), {}, collections.defaultdict(list)
    rings = collections.defaultdict(list)
    for d in hw.descs:
        rings[(d.engine, d.queue)].append(d)
        by_size[(d.queue, d.nbytes)].append(d)
    for ds in rings.values():
        ds.sort(key=lambda d: d.data)
        for a, b in zip(ds, ds[1:]):
            prev_done[id(b)] = b.data - a.done
    for dma in dmas:
        for data, _ in dma.rings.values():
            for a, b in zip(data, data[1:]):
                if a.nbytes == b.nbytes:
                    spacing[(dma.queue, b.nbytes)].append(b.data - a.data)
    ratios = []
    for (queue, nb), ds in sorted(by_size.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        spc = spacing.get((queue, nb), [])
        head = (f"  {str(queue):10} {nb:6d} {len(ds):5d} {fmt(med([d.done - d.data for d in ds]), 7)} "
                f"{fmt(med([prev_done[id(d)] for d in ds if id(d) in prev_done]), 7)} {fmt(med(spc), 7)} |")
        per_dma = med([dma.nbytes for dma in dmas if dma.queue == queue])
        c = model_class(mo, queue, per_dma) if nb > 4 else None
        if c is None:
            out(head + (" semaphore write: no model part" if nb <= 4 else " no model DMA on this queue"))
            continue
        t = nb * c.ns_per_byte
        ratios += [t / s for s in spc if s > 0]
        out(f"{head} {c.dmas:4d} {c.runs:6d} {c.nbytes / max(c.runs, 1):6.0f} {fmt(t, 7)} | {fr(ratio(t, med(spc)), 8)}")
    if loose:
        out(f"  {loose} data descriptors no semaphore write closed: left out of the DMAs below")
    out("DMAs by ring, backlogged: the time a DMA held a ring that was still busy with the queue's previous DMA when")
    out("  it was triggered (from one semaphore write there to the next), against the model's DMA-engine time for")
    out("  the ring's bytes (its chunk: how far apart back-to-back DMAs on busy engines start):")
    out(f"  {'queue':10} {'ring B':>6} {'hw n':>5} {'time':>7} {'B/ns':>6} | {'model':>7} {'B/ns':>6} | {'model/hw':>8}")
    occ = []
    for (queue, nb), times in sorted(backlogged_ring_times(dmas).items()):
        c = model_class(mo, queue, nb * len(next(d for d in dmas if d.queue == queue).rings))
        if c is None:
            out(f"  {queue:10} {nb:6.0f} {len(times):5d} {fmt(med(times), 7)} {nb / med(times):6.2f} | no model DMA")
            continue
        t = nb * c.ns_per_byte
        occ += [t / v for v in times if v > 0]
        out(f"  {queue:10} {nb:6.0f} {len(times):5d} {fmt(med(times), 7)} {nb / med(times):6.2f} | {fmt(t, 7)} "
            f"{nb / t:6.2f} | {fr(ratio(t, med(times)), 8)}")
    queues = {d.queue for d in dmas}
    for queue in sorted(queues - {q for q, _ in backlogged_ring_times(dmas)}):
        out(f"  {queue:10} none backlogged (each was triggered after the ring finished the one before)")
    return med(ratios), len(ratios), med(occ), len(occ)


def timeline_phases(hw: Side, mo: Side, p, measured: dict, out) -> tuple[float, float]:
    """trn1: each DMA's trigger, first data, semaphore writes and consumer against the model's
    DMA of the same queue and order; the semaphore hops, start and end latencies and issue
    interval the profile measures (into `measured`); the load and store phases (model / hw)."""
    dmas, _ = hw_dmas(hw)
    ring_time = {(q, nb): med(v) for (q, nb), v in backlogged_ring_times(dmas).items()}
    by_bytes = collections.defaultdict(list)
    for (q, nb), v in ring_time.items():
        by_bytes[nb].append(v)
    model_by_queue = collections.defaultdict(list)
    for d in mo.dmas:
        model_by_queue[d.queue].append(d)
    out("timeline by DMA (ns from the kernel's start; hw: medians over its 16 rings, 'last' = the last ring's")
    out("  semaphore write, what the consumer waits for) against the model's DMA of the same queue and order. hw")
    out("  start latency (rings idle at the trigger only): median ring's semaphore write - the backlogged ring time")
    out("  for the same bytes (a store's: the loads', no store is backlogged) - trigger end; end latency: last ring's")
    out("  semaphore write - the median ring's:")
    out(f"  {'DMA':12} {'trig end':>8} {'1st data':>8} {'sem':>8} {'last':>8} | {'issue end':>9} {'start':>8} "
        f"{'+chunk':>8} {'end':>8} | {'hw start lat':>12} {'hw end lat':>10} | model {p.dma_start_latency_ns:.0f}, "
        f"{p.dma_end_latency_ns:.0f}")
    for dma in dmas:
        trig = dma.trigger.end if dma.trigger else math.nan
        # every DMA that finished on one of its rings before it had finished there before its trigger
        earlier = [o.rings[r][1].done for o in dmas if o is not dma for r, (_, sem) in dma.rings.items()
                   if r in o.rings and o.rings[r][1].done < sem.done]
        idle = dma.trigger is not None and all(t <= trig for t in earlier)
        per_ring = ring_time.get((dma.queue, dma.ring_bytes)) or med(by_bytes.get(dma.ring_bytes, []))
        start_lat = dma.sem_done - per_ring - trig if idle and not math.isnan(per_ring) else math.nan
        end_lat = dma.end - dma.sem_done
        kind = "loads" if dma.queue == "qSPIO0" else "stores"
        if not math.isnan(start_lat):
            measured[f"DMA start latency, {kind} (rings idle at the trigger)"].append(start_lat)
        measured["DMA end latency (last ring's semaphore write - the median ring's)"].append(end_lat)
        m = model_by_queue[dma.queue][dma.k] if dma.k < len(model_by_queue[dma.queue]) else None
        model = (f"{m.issue_end:9.0f} {m.start:8.0f} {m.start + m.chunk:8.0f} {m.end:8.0f}" if m
                 else f"{'no model DMA':>36}")
        out(f"  {dma.queue + ' ' + str(dma.k):12} {trig:8.0f} {dma.first_data:8.0f} {dma.sem_done:8.0f} {dma.end:8.0f} | "
            f"{model} | {fmt(start_lat, 12, 0)} {fmt(end_lat, 10, 0)}")
    dve = sorted(hw.by("DVE", "0x41"), key=lambda i: i.start)
    mdve = sorted((i for i in mo.instrs if i.kind == "tensor_tensor"), key=lambda i: i.start)
    triggers = sorted(hw.by("POOL", "0xa5"), key=lambda i: i.start)
    waits = sorted(hw.by("POOL", "0xa4"), key=lambda i: i.start)
    loads = [d for d in dmas if d.queue == "qSPIO0"]
    stores = [d for d in dmas if d.queue == "qPoolIO0"]
    per_tile = len(loads) // max(len(dve), 1)
    for k, ins in enumerate(dve):      # tile k: loads k*per_tile.., its DVE add, store trigger k, wait k
        mine = loads[k * per_tile:(k + 1) * per_tile]
        if mine:
            measured["semaphore hop: last load semaphore write -> DVE 0x41 start"].append(
                ins.start - max(d.end for d in mine))
        if k < len(triggers):
            measured["semaphore hop: DVE 0x41 end -> POOL 0xa5 start"].append(triggers[k].start - ins.end)
        # the kernel's last wait only: an earlier one may queue behind POOL's next trigger
        if k == len(dve) - 1 and waits and stores:
            measured["semaphore hop: last store semaphore write -> POOL 0xa4 end"].append(waits[-1].end - stores[-1].end)
        measured[f"DVE 0x41 duration, {ins.elements} el."].append(ins.end - ins.start)
    sp = sorted(hw.by("SP", "0xa5"), key=lambda i: i.start)
    measured["static issue: SP 0xa5 start to start"] += intervals_of([i.start for i in sp])
    measured["SP 0xa5 duration"] += [i.end - i.start for i in sp]
    for (q, nb), t in ring_time.items():
        measured[f"backlogged ring rate, {q} {nb:.0f} B a ring (B/ns)"].append(nb / t)
    if not dve or not mdve:
        out("phases: no DVE 0x41 on one side: no load/store phases")
        return math.nan, math.nan
    hl, ml = dve[-1].start, mdve[-1].start
    hs, ms = hw.span_us * 1e3 - dve[-1].end, mo.span_us * 1e3 - mdve[-1].end
    out(f"phases: loads (kernel start -> the last DVE 0x41 start) hw {hl:.0f} ns, model {ml:.0f} ({ml / hl - 1:+.1%}); "
        f"stores (its end -> kernel end) hw {hs:.0f}, model {ms:.0f} ({ms / hs - 1:+.1%})")
    return ratio(ml, hl), ratio(ms, hs)


# ----- one profile ----------------------------------------------------------------------------

class Result:
    def __init__(self, pid):
        self.pid = pid
        self.mm = self.vs = self.dma = self.spc = self.occ = math.nan
        self.mm_n = self.vs_n = self.dma_n = self.spc_n = self.occ_n = 0
        self.total = self.span = math.nan
        self.load = self.store = math.nan     # trn1: the timeline's load and store phases
        self.measured = collections.defaultdict(list)   # trn1: the constants the profile measures
        self.notes = []
        self.outstanding = []   # trn2: per descriptor, its DMA engine's others in flight when it was queued


def compare(pid: str, verbose: bool, platform: str = "trn2") -> Result:
    hw, meta = load_hardware(pid, DATA_DIRS[platform])
    kernel, inputs, source = calibration_for(pid)
    t0 = time.perf_counter()
    mo, run, tl = model_side(kernel, inputs, platform)
    elapsed = time.perf_counter() - t0
    res = Result(pid)
    out = print if verbose else (lambda *a, **k: None)
    out(f"\n=== {pid}: {meta['config']}  |  calibration kernel {source} ({elapsed:.1f} s)"
        + ("" if platform == "trn2" else f"  |  model {platform} ({tl.dma_mode} DMAs, "
           f"{cost.generation(platform).core})"))

    # --- structure ---
    out("structure (in-kernel instructions; hardware opcode -> nkisim kinds):")
    out(f"  {'engine':5} {'opcode':6} {'hw n':>6}  {'nkisim kind':28} {'model n':>7}  status")
    hw_counts = collections.Counter((i.engine, i.kind) for i in hw.instrs)
    seen_model = set()
    for (eng, op), n in sorted(hw_counts.items()):
        kinds, key = model_kinds(eng, op)
        if (eng, op) not in OPCODES:
            continue
        if kinds == ("dma_issue",):
            qname = {"SP": "qSPIO0+qSPSpillReload0", "POOL": "qPoolIO0"}[eng]
            mq = [d for d in mo.dma_issue]
            mine = [r for r in run.trace if r.opcode in ("dma_copy", "dma_transpose")]
            mn = sum(1 for r in mine if (model_dma_queue(r) == "qPoolIO0") == (eng == "POOL"))
            out(f"  {eng:5} {op:6} {n:6d}  {'DMAs of ' + qname:28} {mn:7d}  {OPCODES[(eng, op)][1]} "
                f"(model: all {len(mq)} on one DMA-issue queue)")
            continue
        mn = len([i for i in mo.instrs if i.kind in kinds and (eng == "PE" or i.engine == eng)
                  and (key is None or i.key == key)])
        seen_model.update((eng if eng != "PE" else "PE", k) for k in kinds)
        label = "+".join(kinds) + (f" ({key})" if key else "") if kinds else "(none)"
        out(f"  {eng:5} {op:6} {n:6d}  {label:28} {mn if kinds else '-':>7}  {OPCODES[(eng, op)][1]}")
    for (eng, kind), n in sorted(collections.Counter((i.engine, i.kind) for i in mo.instrs).items()):
        if (eng, kind) not in seen_model:
            out(f"  {eng:5} {'?':6} {'-':>6}  {kind:28} {n:7d}  model only: no hardware opcode of this engine maps to it")
    ctl = sum(n for (e, op), n in hw_counts.items() if (e, op) not in OPCODES)
    out(f"  + {ctl} control instructions ({CONTROL})")

    # --- per engine and kind ---
    out("per engine and kind (ns; dur = start->end, intv = median start-to-start on the engine, busy = union us):")
    out(f"  {'engine kind':26} {'hw n':>5} {'dur':>7} {'intv':>7} {'busy':>7} | {'mod n':>5} {'dur':>7} {'intv':>7}"
        f" {'busy':>7} | {'dur':>5} {'intv':>5} {'busy':>5}  (model/hw)")
    hw_iv = collections.defaultdict(list)
    for i, iv in with_intervals(hw.instrs):
        hw_iv[(i.engine, i.kind)].append(iv)
    mo_iv = collections.defaultdict(list)
    for i, iv in with_intervals(mo.instrs):
        mo_iv[(i.engine, i.kind)].append(iv)
    for eng in ("PE", "DVE", "ACT", "POOL", "SP"):
        ops = sorted({i.kind for i in hw.by(eng)} & {op for (e, op) in OPCODES if e == eng})
        for op in ops:
            kinds, key = model_kinds(eng, op)
            h = hw.by(eng, op)
            if kinds == ("dma_issue",):     # the model's one static issue queue, its DMAs of this hw queue
                m = [i for i in mo.dma_issue if i.engine == eng]
                mlabel = "DMA-issue"
            else:
                m = [i for i in mo.instrs if i.kind in kinds and (eng == "PE" or i.engine == eng)
                     and (key is None or i.key == key)]
                mlabel = "+".join(kinds)
            mi = [iv for k in kinds for iv in mo_iv.get((eng, k), [])] if kinds != ("dma_issue",) else \
                intervals_of([i.start for i in m])
            hd, hi, hb = med([i.end - i.start for i in h]), med(hw_iv[(eng, op)]), union((i.start, i.end) for i in h) / 1e3
            md, mdi, mb = (med([i.end - i.start for i in m]), med(mi), union((i.start, i.end) for i in m) / 1e3) \
                if m else (math.nan,) * 3
            out(f"  {eng + ' ' + op + ' ' + mlabel:26.26} {len(h):5d} {fmt(hd, 7)} {fmt(hi, 7)} {fmt(hb, 7, 2)} | "
                f"{len(m):5d} {fmt(md, 7)} {fmt(mdi, 7)} {fmt(mb, 7, 2)} | {fr(ratio(md, hd), 5)} "
                f"{fr(ratio(mdi, hi), 5)} {fr(ratio(mb, hb), 5)}")
        hc = [i for i in hw.by(eng) if int(i.kind, 16) < 0xa0]
        mc = [i for i in mo.instrs if i.engine == eng]
        if hc or mc:
            hb, mb = union((i.start, i.end) for i in hc) / 1e3, union((i.start, i.end) for i in mc) / 1e3
            out(f"  {eng + ' all compute':26} {len(hc):5d} {'':7} {'':7} {fmt(hb, 7, 2)} | {len(mc):5d} {'':7} {'':7}"
                f" {fmt(mb, 7, 2)} | {'':5} {'':5} {fr(ratio(mb, hb), 5)}")
        elif platform != "trn2":
            out(f"  {eng:26} no compute instruction on either side (hw: only DMA triggers and control "
                f"instructions): nothing to compare")

    # --- matmuls by moving free and dtype ---
    hmm = [(i, iv) for i, iv in with_intervals(hw.by("PE", "0x02"))]
    mmm = [(i, iv) for i, iv in with_intervals([i for i in mo.instrs if i.kind in ("nc_matmul", "nc_transpose")])]
    # the model's matmul and transpose are one PE stream, as 0x02 is on the hardware
    mmm = []
    pe = sorted([i for i in mo.instrs if i.kind in ("nc_matmul", "nc_transpose")], key=lambda i: i.start)
    mmm = [(a, b.start - a.start) for a, b in zip(pe, pe[1:])]
    hcls = collections.defaultdict(list)
    hlat = collections.defaultdict(list)
    for i, iv in hmm:
        hcls[(i.elements, i.dtype)].append(iv)
    for i in hw.by("PE", "0x02"):
        hlat[(i.elements, i.dtype)].append(i.end - i.start)
    mcls, mdur, mcount = collections.defaultdict(list), collections.defaultdict(list), collections.Counter()
    for i, iv in mmm:
        mcls[(i.elements, i.dtype)].append(iv)
    for i in pe:
        mdur[(i.elements, i.dtype)].append(i.end - i.start)
        mcount[(i.elements, i.dtype)] += 1
    per_pass = {}
    if hlat:
        out("matmuls (PE 0x02 vs nc_matmul/nc_transpose) by moving free and dtype; passes = hw 0x02 per nkisim matmul:")
        out(f"  {'free':>5} {'dtype':5} {'hw n':>5} {'intv':>7} {'latency':>7} | {'mod n':>5} {'passes':>6} {'intv':>7}"
            f" {'dur':>7} {'per pass':>8} | {'intv/hw':>7}")
    for cls in sorted(hlat, key=lambda c: (c[1] or "", c[0] or 0)):
        mk = cls if cls in mcount else None
        if mk is None:   # nearest moving size of the same dtype
            same = {k[0]: (None, v) for k, v in mcount.items() if k[1] == cls[1]}
            size, _ = nearest(same, cls[0])
            mk = (size, cls[1]) if size is not None else None
        n_h = len(hlat[cls])
        if mk is None:
            out(f"  {cls[0]:5} {cls[1]:5} {n_h:5d} {fmt(med(hcls[cls]), 7)} {fmt(med(hlat[cls]), 7)} | no model matmul")
            continue
        passes = max(1, round(n_h / mcount[mk])) if mcount[mk] else 1
        miv = med(mcls[mk]) if mcls[mk] else med(mdur[mk])
        per = miv / passes
        per_pass[cls] = per
        out(f"  {cls[0]:5} {cls[1]:5} {n_h:5d} {fmt(med(hcls[cls]), 7)} {fmt(med(hlat[cls]), 7)} | {mcount[mk]:5d} "
            f"{passes:6d} {fmt(miv, 7)} {fmt(med(mdur[mk]), 7)} {fmt(per, 8)} | {fr(ratio(per, med(hcls[cls])), 7)}"
            + ("" if mk == cls else f"  (model class {mk[0]})"))
    rs = [per_pass[(i.elements, i.dtype)] / iv for i, iv in hmm if (i.elements, i.dtype) in per_pass and iv > 0]
    res.mm, res.mm_n = med(rs), len(rs)
    if not hlat and platform != "trn2":
        out(f"matmuls: none in this profile (PE runs only its b1 marker): the Tensor Engine model is not checked on "
            f"{platform}")

    # --- Vector / Scalar instructions ---
    out("Vector/Scalar instructions by opcode, elements per partition (hw: 0x41's decoded free size, other opcodes'")
    out("  free_heuristic, a guess) and dtype (hw: 0x41's decoded dtypes, else the profile's), against the model's")
    out("  instructions of the mapped kind on the same engine (else on DVE/ACT), nearest elements, same dtype first:")
    out(f"  {'eng':4} {'op':5} {'el.':>5} {'dtype':5} {'hw n':>5} {'dur':>7} | {'model kind':22} {'eng':4} {'el.':>5} "
        f"{'dtype':5} {'n':>4} {'dur':>7} | {'dur':>5}")
    vs_ratios = []
    prof_dtype = "fp16" if "fp16" in pid else "fp32"
    for eng in ("DVE", "ACT"):
        for op in sorted({i.kind for i in hw.by(eng)}):
            kinds, key = model_kinds(eng, op)
            if not kinds or kinds == ("dma_issue",):
                continue
            m = [i for i in mo.instrs if i.kind in kinds and i.engine == eng and (key is None or i.key == key)]
            if not m:   # placed elsewhere by the model: the same kind on the other engine
                m = [i for i in mo.instrs if i.kind in kinds and i.engine in ("DVE", "ACT")
                     and (key is None or i.key == key)]
            mcls = collections.defaultdict(list)
            for i in m:
                mcls[(i.elements, i.dtype, i.engine)].append(i.end - i.start)
            hcls = collections.defaultdict(list)
            for i in hw.by(eng, op):
                hcls[(i.elements, i.dtype or prof_dtype)].append(i.end - i.start)
            for (el, dt), durs in sorted(hcls.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
                hd = med(durs)
                if not mcls:
                    out(f"  {eng:4} {op:5} {el or 0:5} {dt:5} {len(durs):5d} {fmt(hd, 7)} | no model instruction")
                    continue
                mk = min(mcls, key=lambda k: (abs(math.log(max(k[0], 1) / max(el or 1, 1))), k[1] != dt))
                md = med(mcls[mk])
                vs_ratios += [md / d for d in durs if d > 0]
                out(f"  {eng:4} {op:5} {el or 0:5} {dt:5} {len(durs):5d} {fmt(hd, 7)} | "
                    f"{'+'.join(kinds) + (' ' + key if key else ''):22} {mk[2]:4} {mk[0]:5} {mk[1]:5} "
                    f"{len(mcls[mk]):4d} {fmt(md, 7)} | {fr(ratio(md, hd), 5)}")
    res.vs, res.vs_n = med(vs_ratios), len(vs_ratios)
    res.occ, res.occ_n = vector_scalar_occupancy(hw, mo, prof_dtype, out)
    if platform != "trn2" and not res.occ_n:
        out("Vector/Scalar occupancy: no DVE or ACT instruction started while the one before it was running, so the "
            "profile shows no occupancy (only latencies)")
    tt = collections.defaultdict(list)
    for i in hw.by("DVE", "0x41"):
        tt[i.elements].append(i.end - i.start)
    base, per_el = README_DVE_FIT[platform]
    if tt:
        out(f"  DVE 0x41 tensor_tensor against the README's fit over all profiles ({base} + {per_el} ns/el.): " + ", ".join(
            f"{el} el. {med(v):.1f} (fit {base + per_el * el:.1f})" for el, v in sorted(tt.items())))
    if platform != "trn2":
        res.dma, res.dma_n, res.spc, res.spc_n = dma_rings(hw, mo, out)
        res.load, res.store = timeline_phases(hw, mo, tl.params, res.measured, out)
        res.measured["total_time - kernel span"].append((hw.total_us - hw.span_us) * 1e3)
        res.total, res.span = ratio(mo.total_us, hw.total_us), ratio(mo.span_us, hw.span_us)
        out(f"totals: total_time hw {hw.total_us:.1f} us, model {mo.total_us:.1f} us ({res.total - 1:+.1%}); "
            f"kernel span hw {hw.span_us:.1f} us, model makespan {mo.span_us:.1f} us ({res.span - 1:+.1%})")
        return res

    # --- DMA ---
    out("DMA descriptors (kernel) per queue and size. hw: queued->data (q-d), data->done (d-d), q->done, and the")
    out("  completion spacing on its DMA engine of a descriptor queued before the previous one there completed")
    out("  (spc, an occupancy; median over such backlogged descriptors). model: the class of")
    out("  DMAs (same queue, nearest total bytes), its descriptors (contiguous runs) and run bytes, and its DMA")
    out("  engines' time for the hw descriptor's bytes (bytes x its ns/B: 23 B/ns + 5 ns a run + 99 ns a partial")
    out("  HBM write) and +300 ns end latency; 4-byte descriptors (semaphore writes, README) have no model part:")
    out(f"  {'queue':16} {'bytes':>6} {'hw n':>5} {'q-d':>7} {'d-d':>7} {'q-done':>7} {'spc':>7} | {'DMAs':>4} "
        f"{'runs':>6} {'run B':>6} {'time':>7} {'+end':>7} | {'q-d':>5} {'q-done':>6} {'spc':>5}")
    hq = collections.defaultdict(list)
    for d in hw.descs:
        hq[(d.queue, d.nbytes)].append(d)
    sizes = collections.defaultdict(set)
    for q, nb in hq:
        sizes[q].add(nb)
    groups = collections.defaultdict(int)     # (queue, payload) -> bytes, "+4" twins together
    for (q, nb), ds in hq.items():
        groups[(q, nb - 4 if nb - 4 in sizes[q] else nb)] += nb * len(ds)
    classes = collections.defaultdict(list)
    for c in mo.dma_classes.values():
        classes[c.queue].append(c)
    dma_ratios, spc_ratios = [], []
    # occupancy: on one DMA engine, a descriptor queued before the previous one completed
    # (backlogged) completes done - previous done after it
    backlog, by_engine = {}, collections.defaultdict(list)
    for d in hw.descs:
        by_engine[d.engine].append(d)
    for v in by_engine.values():
        v.sort(key=lambda d: d.done)
        for a, b in zip(v, v[1:]):
            if b.queued <= a.done:
                backlog[id(b)] = b.done - a.done
    for q, nb in sorted(hq, key=lambda k: (str(k[0]), k[1])):
        ds = hq[(q, nb)]
        qd, dd, qdone = (med([d.data - d.queued for d in ds]), med([d.done - d.data for d in ds]),
                         med([d.done - d.queued for d in ds]))
        spcs = [backlog[id(d)] for d in ds if id(d) in backlog]
        spc = med(spcs)
        head = f"  {str(q):16} {nb:6d} {len(ds):5d} {fmt(qd, 7)} {fmt(dd, 7)} {fmt(qdone, 7)} {fmt(spc, 7)} |"
        total = groups.get((q, nb - 4 if nb - 4 in sizes[q] else nb), nb * len(ds))
        if nb <= 4 or not classes.get(q):
            out(head + (" semaphore write: no model part" if nb <= 4 else " no model DMA on this queue"))
            continue
        c = min(classes[q], key=lambda c: abs(math.log(c.nbytes / total)))
        t = nb * c.ns_per_byte
        dma_ratios += [(t + c.tail) / (d.done - d.queued) for d in ds if d.done > d.queued]
        spc_ratios += [t / v for v in spcs if v > 0]
        out(f"{head} {c.dmas:4d} {c.runs:6d} {c.nbytes / max(c.runs, 1):6.0f} {fmt(t, 7)} {fmt(c.tail, 7)} | "
            f"{fr(ratio(t, qd), 5)} {fr(ratio(t + c.tail, qdone))} {fr(ratio(t, spc), 5)}")
    res.dma, res.dma_n = med(dma_ratios), len(dma_ratios)
    res.spc, res.spc_n = med(spc_ratios), len(spc_ratios)
    for q in sorted(set(classes) - {k[0] for k in hq}):
        out(f"  {q:16} model only: {sum(c.runs for c in classes[q])} descriptors")
    waits = [w for c in mo.dma_classes.values() for w in c.waits]
    lat = tl.params.dma_start_latency_ns
    out(f"  model DMAs: median wait for a DMA engine after the {lat / 1e3:.1f} us start latency "
        f"{med([w - lat for w in waits]):.0f} ns (max {max(waits, default=lat) - lat:.0f})")
    hb, mb = sum(d.nbytes for d in hw.descs), sum(d.nbytes for d in mo.descs)
    out(f"  totals: hw {len(hw.descs)} descriptors, {hb / 1e6:.3f} MB | model {len(mo.descs)} descriptors, "
        f"{mb / 1e6:.3f} MB ({len(mo.dma_issue)} DMAs) | descriptors {fr(ratio(len(mo.descs), len(hw.descs)))}, "
        f"bytes {fr(ratio(mb, hb))}")
    span_h, span_m = hw.span_us * 1e3, mo.span_us * 1e3
    h_mean, h_peak = time_weighted(hw.dma_intervals, span_h)
    per_eng = collections.defaultdict(list)
    for d in hw.descs:
        per_eng[d.engine].append((d.queued, d.done))
    h_eng = sum(union(v) for v in per_eng.values()) / span_h
    m_mean, m_peak = time_weighted(mo.dma_intervals, span_m)
    h_eng_b = sum(union([(d.queued, d.data) for d in hw.descs if d.engine == e]) for e in per_eng) / span_h
    m_eng = sum((e - s) * k for s, e, k, _ in mo.engine_busy) / span_m if span_m else math.nan
    m_eng_peak = time_weighted([(s, e) for s, e, k, _ in mo.engine_busy for _ in range(k)], span_m)[1]
    out(f"  concurrency: hw descriptors in flight (queued->done) mean {h_mean:.1f}, max {h_peak}; DMA engines busy "
        f"mean {h_eng:.1f} of {len(per_eng)} (queued->data only: {h_eng_b:.1f}) | model (per-DMA slots only) DMAs in flight (issue->end) mean "
        f"{m_mean:.1f}, max {m_peak}; DMA engines busy mean {m_eng:.1f}, max {m_eng_peak} | engines busy "
        f"{fr(ratio(m_eng, h_eng))} (vs queued->data {fr(ratio(m_eng, h_eng_b))})")
    res.outstanding = outstanding_when_queued(hw.descs)
    if res.outstanding:
        o = np.array(res.outstanding)
        out(f"  hw descriptors already in flight on its DMA engine when one is queued: median {np.median(o):.0f}, "
            f"p90 {np.percentile(o, 90):.0f}, max {o.max()} (the model schedules DMAs, not descriptors)")
    hdb = union(d2 for d2 in [(d.data, d.done) for d in hw.descs]) / 1e3
    out(f"  DMA busy (union): hw data->done {hdb:.2f} us (profiles.csv dma_busy_kernel_us), "
        f"hw queued->done {union(hw.dma_intervals) / 1e3:.2f} us, queued->data {union((d.queued, d.data) for d in hw.descs) / 1e3:.2f} us | model transfer {union((s, e) for s, e, _, _ in mo.engine_busy) / 1e3:.2f} us")

    # --- totals ---
    res.total, res.span = ratio(mo.total_us, hw.total_us), ratio(mo.span_us, hw.span_us)
    out(f"totals: total_time hw {hw.total_us:.1f} us, model {mo.total_us:.1f} us ({res.total - 1:+.1%}); "
        f"kernel span hw {hw.span_us:.1f} us, model makespan {mo.span_us:.1f} us ({res.span - 1:+.1%})")
    return res


def outstanding_when_queued(descs) -> list[int]:
    """For each descriptor, how many earlier-queued descriptors of its DMA engine had not completed
    when it was queued (queued -> done in flight): the engine's backlog as its ring admits."""
    counts = []
    by_engine = collections.defaultdict(list)
    for d in descs:
        by_engine[d.engine].append(d)
    for v in by_engine.values():
        v.sort(key=lambda d: d.queued)
        dones = sorted(d.done for d in v)
        counts += [i - bisect.bisect_right(dones, d.queued) for i, d in enumerate(v)]
    return counts


def profile_ids(all_runs: bool, skip_224: bool, data: str = DATA) -> list[str]:
    ids = sorted(f[:-len(".jsonl.gz")] for f in os.listdir(data) if f.endswith(".jsonl.gz"))
    if skip_224:
        ids = [i for i in ids if "224x224" not in i]
    return ids


DETAIL_RUNS = ("part1-vadd-fd1k-a", "part1-vadd-fd2k-a", "part1-transpose-1024-a", "part1-transpose-1024-e")

# trn1: what each measured constant is compared with in the model (a CostParams field)
TRN1_CONSTANTS = (
    ("static issue: SP 0xa5 start to start", "static_issue_ns", "ns"),
    ("SP 0xa5 duration", "static_issue_ns", "ns"),
    ("semaphore hop: last load semaphore write -> DVE 0x41 start", "semaphore_ns", "ns"),
    ("semaphore hop: DVE 0x41 end -> POOL 0xa5 start", "semaphore_ns", "ns"),
    ("semaphore hop: last store semaphore write -> POOL 0xa4 end", "semaphore_ns", "ns"),
    ("DMA start latency, loads (rings idle at the trigger)", "dma_start_latency_ns", "ns"),
    ("DMA start latency, stores (rings idle at the trigger)", "dma_store_start_latency_ns", "ns"),
    ("DMA end latency (last ring's semaphore write - the median ring's)", "dma_end_latency_ns", "ns"),
    ("total_time - kernel span", "profile_overhead_ns", "ns"),
)
TRN1_UNCHECKED = ("the Tensor Engine (PE runs only its b1 marker: no matmul, no transpose), the Scalar engine "
                  "(ACT likewise), GpSimd compute (POOL only triggers DMAs and waits), Vector/Scalar occupancy "
                  "(no DVE instruction was issued while another ran), fp16/bf16 and every dtype but fp32, PSUM, "
                  "the NC-v2 shared SBUF/PSUM ports (nothing here contends), DMA queued->data (queued_ns is null), "
                  "HBM->HBM and SBUF->SBUF DMAs, and DMAs of other than 16000 or 32000 B descriptors")


def trn1_summary(results: list, params) -> None:
    """The trn1 comparison's summary: per profile the ratios, then the constants the profiles
    measure (medians over all of them) against the trn1 model's."""
    print("\n=== summary (trn1): model / hardware (medians of per-instruction ratios; targets: 15% per instruction, "
          "10% totals) ===")
    print("  DVE tt: model tensor_tensor duration / hw 0x41 duration; DMA descr: model DMA-engine time for the "
          "descriptor's bytes / hw data->data spacing on its ring")
    print("  DMA occ: model per-engine time of a DMA (chunk) / hw time it held a backlogged ring; loads, stores: the "
          "timeline's phases (kernel start -> last DVE start; last DVE end -> kernel end)")
    print(f"  {'profile':28} {'DVE tt':>16} {'DMA descr':>16} {'DMA occ':>16} {'loads':>11} {'stores':>11} "
          f"{'total_time':>11} {'span':>11}")

    def cell(r, n, tol):
        if n == 0 or math.isnan(r):
            return f"{'-':>16}"
        return f"{r:5.2f} {'ok' if abs(r - 1) <= tol else 'OUT':>3} n={n:<5d}".rjust(16)

    def tot(r, tol=0.10):
        return f"{'-':>11}" if math.isnan(r) else f"{r - 1:+7.1%} {'ok' if abs(r - 1) <= tol else 'OUT':>3}"
    for r in results:
        print(f"  {r.pid:28} {cell(r.vs, r.vs_n, 0.15)} {cell(r.dma, r.dma_n, 0.15)} {cell(r.spc, r.spc_n, 0.15)} "
              f"{tot(r.load, 0.15):>11} {tot(r.store, 0.15):>11} {tot(r.total):>11} {tot(r.span):>11}")
    for attr, label, tol in (("vs", "DVE tensor_tensor", 0.15), ("dma", "DMA descriptors", 0.15),
                             ("spc", "DMA occupancy", 0.15), ("load", "load phase", 0.15),
                             ("store", "store phase", 0.15), ("total", "total_time", 0.10),
                             ("span", "kernel span", 0.10)):
        vals = [getattr(r, attr) for r in results if not math.isnan(getattr(r, attr))]
        print(f"  {label:17} within {tol:.0%}: {sum(abs(v - 1) <= tol for v in vals)} of {len(vals)} profiles")
    print("  matmul, Vector/Scalar occupancy: no data in the trn1 profiles (see 'not checked')")
    merged = collections.defaultdict(list)
    for r in results:
        for k, v in r.measured.items():
            merged[k] += v
    print("measured on the 12 profiles (median, p10-p90, n) against the trn1 model's constant "
          "(nkisim/cost/generations.py):")
    for label, name, unit in TRN1_CONSTANTS:
        v = merged.get(label, [])
        if not v:
            print(f"  {label:66} no case in these profiles")
            continue
        print(f"  {label:66} {med(v):8.1f} {unit} ({np.percentile(v, 10):.1f}-{np.percentile(v, 90):.1f}, "
              f"n={len(v)}) | {name} {getattr(params, name):g}")
    for label in sorted(k for k in merged if k.startswith(("DVE 0x41", "backlogged"))):
        v = merged[label]
        print(f"  {label:66} {med(v):8.2f} ({np.percentile(v, 10):.2f}-{np.percentile(v, 90):.2f}, n={len(v)})")
    print(f"  model: DMA engines {params.dma_engine_bytes_per_ns:g} B/ns + {params.dma_descriptor_ns:g} ns a "
          f"descriptor (partition row); DVE ({params.dve_cycles_per_element:g} cycles an element + "
          f"{params.dve_overhead_cycles} cycles) at {params.dve_ghz:g} GHz + {params.dve_pipeline_ns:g} ns pipeline")
    print(f"not checked by the trn1 profiles (no data): {TRN1_UNCHECKED}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all-runs", action="store_true", help="print the detail of every part-1 run, not a and e")
    parser.add_argument("--skip-224", action="store_true", help="leave out conv-d fp16 224x224")
    parser.add_argument("--platform", choices=sorted(DATA_DIRS), default="trn2",
                        help="whose profiles and cost model: trn2 (default) or trn1 (the part-1 vector add only)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    if args.platform != "trn2":
        if args.skip_224:
            parser.error(f"--skip-224 leaves out a trn2 conv profile; the {args.platform} set has none")
        main_trn1(args, t0)
        return
    print("Opcode and queue map (profile -> nkisim; status: the README's label, 'bench:' = identified here):")
    for (eng, op), (kinds, status, why) in OPCODES.items():
        print(f"  {eng:4} {op}  -> {'+'.join(kinds) or '(none)':24} [{status}] {why}")
    print(f"  {CONTROL}")
    for q, (what, status) in DMA_QUEUES.items():
        print(f"  DMA {q:16} -> {what} [{status}]")
    print("Not in the model's Timeline, so compared as noted: per-descriptor DMA timings (the model's "
          "per-descriptor service time is derived from its cost rule and the DMA's slot: bytes/23 B/ns + 5 ns "
          "+ 99 ns a partial HBM write, then a 300 ns end latency per DMA), PE 0x01 (folded into nc_matmul), "
          "semaphores and control instructions, the hardware's separate SP and POOL DMA triggers (one static "
          "issue queue in the model), which ring a descriptor used.")
    results = []
    for pid in profile_ids(args.all_runs, args.skip_224):
        verbose = not pid.startswith("part1") or args.all_runs or pid in DETAIL_RUNS
        results.append(compare(pid, verbose))
    print("\n=== summary: model / hardware (medians of per-instruction ratios; targets: 15% per instruction, "
          "10% totals) ===")
    print("  matmul: model interval per pass / hw 0x02 issue interval; V/S: model duration / hw duration (DVE, ACT); "
          "DMA descr: model DMA-engine time for the descriptor's bytes + 300 ns end latency / hw queued->done")
    print("  DMA occ: model DMA-engine time for the descriptor's bytes / hw completion spacing of backlogged "
          "descriptors on one engine")
    print("  V/S occ: model cost-rule time (queue held) / hw completion spacing of DVE/ACT instructions issued while "
          "the previous one was running")
    print(f"  {'profile':28} {'matmul':>16} {'Vector/Scalar':>16} {'V/S occ':>16} {'DMA descr':>16} {'DMA occ':>16} "
          f"{'total_time':>11} {'span':>11}")

    def cell(r, n, tol):
        if n == 0 or math.isnan(r):
            return f"{'-':>16}"
        return f"{r:5.2f} {'ok' if abs(r - 1) <= tol else 'OUT':>3} n={n:<5d}".rjust(16)

    def tot(r):
        return f"{r - 1:+7.1%} {'ok' if abs(r - 1) <= 0.10 else 'OUT':>3}"
    for r in results:
        print(f"  {r.pid:28} {cell(r.mm, r.mm_n, 0.15)} {cell(r.vs, r.vs_n, 0.15)} {cell(r.occ, r.occ_n, 0.15)} "
              f"{cell(r.dma, r.dma_n, 0.15)} "
              f"{cell(r.spc, r.spc_n, 0.15)} {tot(r.total):>11} {tot(r.span):>11}")
    def count(attr, tol):
        vals = [getattr(r, attr) for r in results if not math.isnan(getattr(r, attr))]
        return sum(abs(v - 1) <= tol for v in vals), len(vals)
    for attr, label, tol in (("mm", "matmul", 0.15), ("vs", "Vector/Scalar", 0.15), ("occ", "V/S occupancy", 0.15),
                             ("dma", "DMA descriptors", 0.15),
                             ("spc", "DMA occupancy", 0.15),
                             ("total", "total_time", 0.10), ("span", "kernel span", 0.10)):
        ok, n = count(attr, tol)
        print(f"  {label:16} within {tol:.0%}: {ok} of {n} profiles")
    flights = [x for r in results for x in r.outstanding]
    if flights:
        per = [float(np.median(r.outstanding)) for r in results if r.outstanding]
        print(f"  DMA backlog: descriptors already in flight on a DMA engine when one is queued, median per profile "
              f"{min(per):.0f}-{max(per):.0f}, max over all {len(flights)} descriptors {max(flights)} (what the "
              f"DMA descriptor column's q->done holds beyond a descriptor's own time)")
    print("not computed: which DMA a hardware descriptor belongs to (unknown in the data), so no per-DMA latency "
          "against the model's slots; ACT 0x23 and PE 0x01 have no model instruction; free sizes of DVE/ACT opcodes "
          "other than 0x41 are the README's heuristic; nothing skipped (conv-d 224x224 included; --skip-224 leaves it out)")
    print(f"bench time {time.perf_counter() - t0:.1f} s")


def main_trn1(args, t0: float) -> None:
    platform = args.platform
    gen = cost.generation(platform)
    params = cost.params_for(platform)
    print(f"{gen.core} ({platform}) model against {DATA_DIRS[platform]}: calibration kernels run under "
          f"SimSettings(platform={platform!r}), cost.params_for({platform!r})")
    print("Opcode and queue map (profile -> nkisim), the entries these profiles have:")
    for (eng, op), (kinds, status, why) in OPCODES.items():
        if (eng, op) in (("DVE", "0x41"), ("SP", "0xa5"), ("POOL", "0xa5")):
            print(f"  {eng:4} {op}  -> {'+'.join(kinds) or '(none)':24} [{status}] {why}")
    print("  PE, ACT: only the b1 marker (control); POOL 0xa4: semaphore waits (control); no other opcode occurs")
    for q in ("qSPIO0", "qPoolIO0"):
        what, status = DMA_QUEUES[q]
        print(f"  DMA {q:16} -> {what} [{status}; trn1 README: the same queues, DMA engines 0..15]")
    print(f"The model prebuilds every DMA ({gen.core} has no DGE) and issues them on one static queue, "
          f"{params.static_issue_ns:g} ns each; a DMA's bytes move on the 16 DMA engines at "
          f"{params.dma_engine_bytes_per_ns:g} B/ns + {params.dma_descriptor_ns:g} ns a descriptor, "
          f"{params.dma_start_latency_ns:g} ns after its issue, and land {params.dma_end_latency_ns:g} ns after "
          f"the engines finish; a cross-engine dependency costs {params.semaphore_ns:g} ns.")
    results = []
    for pid in profile_ids(args.all_runs, False, DATA_DIRS[platform]):
        results.append(compare(pid, args.all_runs or pid in DETAIL_RUNS, platform))
    trn1_summary(results, params)
    print(f"bench time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

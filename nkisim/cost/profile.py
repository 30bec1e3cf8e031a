"""What neuron-profile would tell a student, from the simulated trace and its timeline:
per-engine utilisation, DMA traffic, achieved FLOP/s and MFU, the roofline bound of the
kernel's work, a one-line bottleneck verdict, a timeline picture (timeline_svg.py) and a
JSON export. `profile_summary` bundles them for the grader and the web pages."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ..trace import Engine
from .params import CostParams
from .masks import restricted
from .rules import psum_16bit_extra_ns
from .scheduler import Timeline, core_queue
from .timeline_svg import timeline_svg

LANE_ORDER = ("PE", "DVE", "ACT", "POOL", "SP", "DGE-SP", "DGE-ACT", "DMA-issue", "DMA")
LANE_LABELS = {"PE": "Tensor (PE)", "DVE": "Vector (DVE)", "ACT": "Scalar (ACT)", "POOL": "GpSimd (POOL)",
               "SP": "Sync (SP)", "DGE-SP": "DGE from Sync", "DGE-ACT": "DGE from Scalar",
               "DMA-issue": "DMA issue", "DMA": "DMA engines"}
ISSUE_LANES = ("DGE-SP", "DGE-ACT", "DMA-issue")


def interval_union(intervals) -> float:
    """The length of the union of [start, end) intervals: an engine's busy time as a profile of
    the hardware counts it (neuron-profile's timeline, bench/profiles.py's hardware side)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return 0.0
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


@dataclass
class EngineActivity:
    """One engine's instructions in the terms a hardware profile gives them: how many, the union
    of their intervals, the median duration, and the median issue interval (start to start of
    consecutive instructions), so a simulated profile can be held against a neuron-profile one."""
    instructions: int
    busy_us: float
    median_ns: float
    median_interval_ns: float


def engine_activity(trace, timeline: Timeline) -> dict[str, EngineActivity]:
    """Per compute-engine and DMA-issue lane of the timeline (the DMA engines' transfers are in
    Profile.engines): what engine_activity's fields say."""
    spans: dict[str, list] = {}
    for slot in timeline.slots:
        if slot.queue == "DMA":
            if slot.issue_queue and slot.issue_end > slot.issue_start:
                spans.setdefault(slot.issue_queue, []).append((slot.issue_start, slot.issue_end))
        elif slot.end > slot.start:
            spans.setdefault(slot.queue, []).append((slot.start, slot.end))
    activity = {}
    for lane, intervals in spans.items():
        starts = sorted(s for s, _ in intervals)
        activity[lane] = EngineActivity(len(intervals), interval_union(intervals) / 1e3,
                                        _median([e - s for s, e in intervals]),
                                        _median([b - a for a, b in zip(starts, starts[1:])]))
    return activity


@dataclass
class EngineStats:
    busy_us: float
    utilisation: float        # busy time / total kernel time
    instructions: int


@dataclass
class Profile:
    total_us: float
    overhead_us: float
    dma_mode: str
    engines: dict[str, EngineStats]
    dma_count: int
    dma_bytes: int
    hbm_bytes: int
    matmul_flops: int
    transpose_flops: int
    achieved_tflops: float
    mfu: float                # as neuron-profile: (hardware - transpose FLOPs) / (peak x total time)
    roofline_us: float        # fixed overhead + max(compute at peak, HBM traffic at DMA bandwidth)
    roofline_limit: str       # "compute" or "memory"
    hotspots: list[dict] = field(default_factory=list)   # source lines by engine time
    hazard_waits: int = 0     # instructions held back by a write-after-read/-write hazard
    hazard_wait_us: float = 0.0   # their waits, summed
    hazard_lines: list[dict] = field(default_factory=list)   # source lines whose writes waited most
    psum_16bit_reads: int = 0     # Vector/Scalar instructions reading 16-bit data (a transpose's) out of PSUM
    psum_16bit_us: float = 0.0    # the engine time that costs them beyond streaming their elements
    psum_16bit_engines: list[str] = field(default_factory=list)   # the engines they ran on
    pe_tiled_matmuls: int = 0     # matmuls in the PE tiling mode (tile_position=): timed as untiled
    cores: int = 1                # physical cores the kernel ran on (NKI 0.6's kernel[2]: 2)
    activity: dict[str, EngineActivity] = field(default_factory=dict)   # the hardware profile's terms

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        lines = [f"estimated latency      {self.total_us:10.1f} us  (fixed overhead {self.overhead_us:.1f} us, "
                 f"DMA mode {self.dma_mode})",
                 f"roofline bound         {self.roofline_us:10.1f} us  ({self.roofline_limit}-bound)",
                 f"MFU                    {self.mfu:10.1%}  ({self.achieved_tflops:.2f} TFLOP/s achieved)",
                 f"DMA                    {self.dma_count:10d} transfers, {self.dma_bytes / 1e6:.2f} MB"]
        for core in range(self.cores):
            for name in LANE_ORDER:
                lane = core_queue(name, core) if name != "DMA" else name
                if lane in self.engines and (core == 0 or name != "DMA"):
                    e = self.engines[lane]
                    label = LANE_LABELS[name] + (f", core {core}" if core else "")
                    lines.append(f"{label:22} {e.busy_us:10.1f} us busy  {e.utilisation:6.1%}  "
                                 f"{e.instructions} instructions")
        if self.hazard_waits:
            lines.append(f"hazard waits           {self.hazard_wait_us:10.1f} us  {self.hazard_waits} instructions "
                         f"waited to overwrite memory still being read or written")
            for h in self.hazard_lines[:3]:
                lines.append(f"  {h['line']:40} {h['wait_us']:10.1f} us  {h['instructions']} instr")
        if self.psum_16bit_reads:
            lines.append(f"16-bit PSUM reads      {self.psum_16bit_us:10.1f} us  {self.psum_16bit_reads} instructions "
                         f"read a 16-bit transpose's result out of PSUM, slower than they stream")
        if self.pe_tiled_matmuls:
            lines.append(f"PE tiling mode         {self.pe_tiled_matmuls:10d} matmuls asked for a PE tile (tile_position=): "
                         f"timed as untiled, one after another (no hardware measurement of tiled matmuls), so "
                         f"their Tensor Engine time is an upper bound")
        if self.activity:
            lines.append("as a hardware profile counts them (union of instruction intervals; medians):")
            for lane in sorted(self.activity, key=_lane_rank):
                a = self.activity[lane]
                lines.append(f"  {lane:20} {a.busy_us:10.1f} us busy  {a.instructions:6d} instr  "
                             f"{a.median_ns:8.1f} ns each  {a.median_interval_ns:8.1f} ns apart")
        if self.hotspots:
            lines.append("busiest source lines:")
            for h in self.hotspots[:5]:
                lines.append(f"  {h['line']:40} {h['busy_us']:10.1f} us  {h['instructions']} instr  ({h['queue']})")
        return "\n".join(lines)


def _flops(rec) -> tuple[int, int]:
    """(hardware FLOPs, of which transpose FLOPs) of one Tensor Engine instruction."""
    if rec.opcode == "nc_matmul":
        a = rec.attrs
        flops = 2 * a["k"] * a["m"] * a["n"]
        return flops, flops if a.get("is_transpose") else 0
    if rec.opcode == "nc_transpose" and rec.engine is Engine.TENSOR:
        a = rec.attrs
        flops = 2 * a["p"] * a["f"] * a["p"]     # a matmul against a P x P identity
        return flops, flops
    return 0, 0


def build_profile(trace, timeline: Timeline, params: CostParams | None = None) -> Profile:
    """The profile of a timeline, with the peaks of the generation that timed it (`params`
    overrides them)."""
    params = timeline.params if params is None else params
    total_ns = timeline.total_ns
    counts: dict[str, int] = {}
    lines: dict[tuple[str, str], list] = {}
    hw = tr = 0
    fp32_flops = 0
    tiled = 0               # matmuls in the PE tiling mode
    hbm_bytes = 0
    for rec, slot in zip(trace, timeline.slots):
        counts[slot.queue] = counts.get(slot.queue, 0) + 1
        f, t = _flops(rec)
        hw += f
        tr += t
        if rec.opcode == "nc_matmul":
            if "float32" in (rec.attrs["dtype"], rec.attrs["moving_dtype"]):
                fp32_flops += f - t
            tiled += "pe_tile" in rec.attrs
        if slot.queue == "DMA":   # HBM traffic: bytes read from and written to HBM
            hbm_bytes += sum(r.nbytes for r in rec.reads + rec.writes if r.buffer in ("hbm", "shared_hbm"))
        busy = (slot.issue_end - slot.issue_start) if slot.queue == "DMA" else (slot.end - slot.start)
        key = (rec.site.short if rec.site else "?", "DMA" if slot.queue == "DMA" else slot.queue)
        entry = lines.setdefault(key, [0.0, 0])
        entry[0] += busy
        entry[1] += 1
    psum_n, psum_ns, psum_engines = 0, 0.0, set()
    hazards: dict[str, list] = {}
    for rec, slot in zip(trace, timeline.slots):
        lost = psum_16bit_extra_ns(restricted(rec), slot.queue.partition(":")[0], params)
        if lost > 0:
            psum_n, psum_ns = psum_n + 1, psum_ns + lost
            psum_engines.add(slot.queue.partition(":")[0])
        if slot.queue == "DMA" and slot.issue_queue:
            counts[slot.issue_queue] = counts.get(slot.issue_queue, 0) + 1
        if slot.hazard_wait > 0:
            entry = hazards.setdefault(rec.site.short if rec.site else "?", [0.0, 0])
            entry[0] += slot.hazard_wait
            entry[1] += 1
    engines = {name: EngineStats(busy / 1e3, busy / total_ns if total_ns else 0.0, counts.get(name, 0))
               for name, busy in timeline.busy_ns.items()}
    # a launch on a logical NeuronCore of several physical cores has each one's engines
    cores = 1 + max((rec.attrs.get("core", 0) for rec in trace), default=0)
    if timeline.dma_mode == "dge" and timeline.dma_count:   # both DGEs, so an idle one shows as free
        for core in range(cores):
            for lane in ("DGE-SP", "DGE-ACT"):
                engines.setdefault(core_queue(lane, core), EngineStats(0.0, 0.0, 0))
    useful = hw - tr
    peak = params.pe_peak_flops_per_ns * cores
    compute_ns = (useful - fp32_flops) / peak + fp32_flops / (peak / params.pe_fp32_factor)
    memory_ns = hbm_bytes / (params.dma_bytes_per_ns * cores)
    hotspots = sorted(({"line": k[0], "queue": k[1], "busy_us": v[0] / 1e3, "instructions": v[1]}
                       for k, v in lines.items()), key=lambda h: -h["busy_us"])
    return Profile(
        total_us=total_ns / 1e3, overhead_us=timeline.overhead_ns / 1e3, dma_mode=timeline.dma_mode,
        engines=engines, dma_count=timeline.dma_count, dma_bytes=timeline.dma_bytes, hbm_bytes=hbm_bytes,
        matmul_flops=hw, transpose_flops=tr,
        achieved_tflops=useful / total_ns / 1e3 if total_ns else 0.0,
        mfu=useful / (peak * total_ns) if total_ns else 0.0,
        roofline_us=(timeline.overhead_ns + max(compute_ns, memory_ns)) / 1e3,
        roofline_limit="compute" if compute_ns >= memory_ns else "memory",
        hotspots=hotspots[:20],
        hazard_waits=sum(v[1] for v in hazards.values()),
        hazard_wait_us=sum(v[0] for v in hazards.values()) / 1e3,
        hazard_lines=sorted(({"line": k, "wait_us": v[0] / 1e3, "instructions": v[1]} for k, v in hazards.items()),
                            key=lambda h: -h["wait_us"])[:10],
        psum_16bit_reads=psum_n, psum_16bit_us=psum_ns / 1e3, psum_16bit_engines=sorted(psum_engines),
        pe_tiled_matmuls=tiled, cores=cores,
        activity=engine_activity(trace, timeline))


def _lane_rank(lane: str) -> tuple:
    name, _, core = lane.partition(":core")
    return (int(core or 0), LANE_ORDER.index(name) if name in LANE_ORDER else len(LANE_ORDER), lane)


def write_json(profile: Profile, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(profile.to_json(), fh, indent=2)


_BUSY = 0.6        # an engine busy this share of the kernel is what bounds it
_HAZARD_SHARE = 0.2   # hazard waits summing to this share of the kernel explain a latency-bound one
_PSUM_16BIT_SHARE = 0.2   # 16-bit PSUM reads costing this share of the kernel are worth naming


def _psum_16bit(profile: Profile) -> str:
    """A clause naming the Vector/Scalar time spent reading 16-bit transposes out of PSUM, when
    it matters."""
    if profile.psum_16bit_us <= _PSUM_16BIT_SHARE * profile.total_us:
        return ""
    spread = ": spreading those copies over both engines overlaps them" \
        if len(profile.psum_16bit_engines) == 1 else ""
    return (f"; {profile.psum_16bit_us:.0f} us of Vector/Scalar time goes to reading 16-bit transposes out of "
            f"PSUM ({profile.psum_16bit_reads} instructions on {' and '.join(profile.psum_16bit_engines)}, slower "
            f"per element than any other copy){spread}")


def _busiest(profile: Profile):
    return max(profile.engines.items(), key=lambda kv: kv[1].utilisation, default=None)


# what bounds a kernel, by its busiest lane (grader/fidelity_bands.json has the model's error per class)
BOUND_OF_LANE = {"PE": "tensor", "DVE": "vector", "ACT": "vector", "POOL": "vector", "SP": "vector",
                 "DGE-SP": "dma", "DGE-ACT": "dma", "DMA-issue": "dma", "DMA": "dma"}
BOUNDS = ("tensor", "vector", "dma", "latency")


def bound_by(profile: Profile) -> str:
    """"tensor", "vector" (Vector, Scalar or GpSimd engine), "dma" (issue or transfer) or "latency":
    the class of what bounds the kernel, by the rule the verdict names it with."""
    busiest = _busiest(profile)
    if busiest is None or busiest[1].utilisation < _BUSY:
        return "latency"
    return BOUND_OF_LANE.get(busiest[0].partition(":core")[0], "latency")


def verdict(profile: Profile) -> str:
    """One line: what bounds the kernel, from engine utilisation and the roofline."""
    busiest = _busiest(profile)
    off_roof = f"{profile.total_us / profile.roofline_us:.1f}x the {profile.roofline_limit}-bound roofline " \
               f"({profile.roofline_us:.0f} us)" if profile.roofline_us else ""
    if busiest is None or busiest[1].utilisation < _BUSY:
        share = busiest[1].utilisation if busiest else 0.0
        if profile.hazard_wait_us > _HAZARD_SHARE * profile.total_us and profile.hazard_lines:
            line = profile.hazard_lines[0]
            return (f"Latency-bound by reuse: {profile.hazard_waits} instructions waited {profile.hazard_wait_us:.0f} us "
                    f"in all to overwrite memory still being read or written (most at {line['line']}); HBM is "
                    f"never renamed, so a fresh scratch or output region per iteration lets them overlap; {off_roof}")
        return (f"Latency-bound: no engine is busy more than {share:.0%} of the time, so instructions wait "
                f"on each other (DMA latency, dependencies across engines){_psum_16bit(profile)}; {off_roof}")
    name, stats = busiest
    if name == "PE":
        return f"Tensor Engine bound: busy {stats.utilisation:.0%} of the kernel, MFU {profile.mfu:.0%}; {off_roof}"
    if name in ISSUE_LANES:
        issued = profile.engines[name].instructions
        per = stats.busy_us / max(issued, 1)
        other = {"DGE-SP": "engine=nisa.engine.scalar", "DGE-ACT": "engine=nisa.engine.sync"}.get(name)
        idle = profile.engines.get("DGE-SP" if name == "DGE-ACT" else "DGE-ACT")
        spread = f"; the other DGE is free: {other} on some dma_copy calls splits the issue" \
            if other and (idle is None or idle.instructions == 0) else ""
        return (f"DMA issue bound: {issued} DMAs issued one after another on the {LANE_LABELS[name]} queue "
                f"({per:.2f} us each) fill {stats.utilisation:.0%} of the kernel; fewer, larger DMAs help{spread}; "
                f"{off_roof}")
    if name == "DMA":
        return (f"DMA bound: the 16 DMA engines are busy {stats.utilisation:.0%} of the kernel moving "
                f"{profile.dma_bytes / 1e6:.1f} MB; larger contiguous runs or less traffic help; {off_roof}")
    return (f"{LANE_LABELS.get(name, name)} bound: busy {stats.utilisation:.0%} of the kernel; "
            f"move work to idle engines or shrink it{_psum_16bit(profile)}; {off_roof}")


def profile_summary(trace, timeline: Timeline, thresholds_us: dict | None = None,
                    params: CostParams | None = None) -> dict:
    """What the grader and the web pages show for a simulated timed run: the timeline picture,
    MFU, per-engine utilisation, the busiest source lines and the bottleneck verdict."""
    prof = build_profile(trace, timeline, params)
    line = verdict(prof)
    return {"svg": timeline_svg(trace, timeline, thresholds_us=thresholds_us, verdict=line),
            "mfu": prof.mfu,
            "achieved_tflops": prof.achieved_tflops,
            "roofline_us": prof.roofline_us,
            "roofline_limit": prof.roofline_limit,
            "engine_utilisation": {name: e.utilisation for name, e in prof.engines.items()},
            "engine_instructions": {name: e.instructions for name, e in prof.engines.items()},
            "busiest_lines": prof.hotspots[:10],
            "verdict": line,
            "bound": bound_by(prof),
            "total_us": prof.total_us}

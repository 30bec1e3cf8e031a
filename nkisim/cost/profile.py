"""What neuron-profile would tell a student, from the simulated trace and its timeline:
per-engine utilisation, DMA traffic, achieved FLOP/s and MFU, the roofline bound of the
kernel's work, a timeline picture (SVG, one lane per engine) and a JSON export."""
from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field

from ..trace import Engine
from .params import DEFAULT_PARAMS, CostParams
from .scheduler import Timeline

LANE_ORDER = ("PE", "DVE", "ACT", "POOL", "DGE", "DMA-issue", "DMA")
LANE_LABELS = {"PE": "Tensor (PE)", "DVE": "Vector (DVE)", "ACT": "Scalar (ACT)", "POOL": "GpSimd (POOL)",
               "DGE": "DMA issue (DGE)", "DMA-issue": "DMA issue", "DMA": "DMA engines"}
COLORS = {"nc_matmul": "#2e7d32", "nc_transpose": "#81c784", "tensor_copy": "#1565c0",
          "tensor_tensor": "#42a5f5", "tensor_scalar": "#90caf9", "tensor_reduce": "#7e57c2",
          "activation": "#ef6c00", "memset": "#9e9e9e", "dma_copy": "#c62828", "dma_transpose": "#e57373",
          "iota": "#6d4c41", "affine_select": "#8d6e63", "tensor_partition_reduce": "#5d4037"}


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

    def to_json(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        lines = [f"estimated latency      {self.total_us:10.1f} us  (fixed overhead {self.overhead_us:.1f} us, "
                 f"DMA mode {self.dma_mode})",
                 f"roofline bound         {self.roofline_us:10.1f} us  ({self.roofline_limit}-bound)",
                 f"MFU                    {self.mfu:10.1%}  ({self.achieved_tflops:.2f} TFLOP/s achieved)",
                 f"DMA                    {self.dma_count:10d} transfers, {self.dma_bytes / 1e6:.2f} MB"]
        for name in LANE_ORDER:
            if name in self.engines:
                e = self.engines[name]
                lines.append(f"{LANE_LABELS[name]:22} {e.busy_us:10.1f} us busy  {e.utilisation:6.1%}  "
                             f"{e.instructions} instructions")
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


def build_profile(trace, timeline: Timeline, params: CostParams = DEFAULT_PARAMS) -> Profile:
    total_ns = timeline.total_ns
    counts: dict[str, int] = {}
    lines: dict[tuple[str, str], list] = {}
    hw = tr = 0
    fp32_flops = 0
    hbm_bytes = 0
    for rec, slot in zip(trace, timeline.slots):
        counts[slot.queue] = counts.get(slot.queue, 0) + 1
        f, t = _flops(rec)
        hw += f
        tr += t
        if rec.opcode == "nc_matmul" and "float32" in (rec.attrs["dtype"], rec.attrs["moving_dtype"]):
            fp32_flops += f - t
        if slot.queue == "DMA":   # HBM traffic: bytes read from and written to HBM
            hbm_bytes += sum(r.nbytes for r in rec.reads + rec.writes if r.buffer in ("hbm", "shared_hbm"))
        busy = (slot.issue_end - slot.issue_start) if slot.queue == "DMA" else (slot.end - slot.start)
        key = (rec.site.short if rec.site else "?", "DMA" if slot.queue == "DMA" else slot.queue)
        entry = lines.setdefault(key, [0.0, 0])
        entry[0] += busy
        entry[1] += 1
    issue_lane = "DGE" if timeline.dma_mode == "dge" else "DMA-issue"
    if "DMA" in counts:
        counts[issue_lane] = counts["DMA"]
    engines = {name: EngineStats(busy / 1e3, busy / total_ns if total_ns else 0.0, counts.get(name, 0))
               for name, busy in timeline.busy_ns.items()}
    useful = hw - tr
    peak = params.pe_peak_flops_per_ns
    compute_ns = (useful - fp32_flops) / peak + fp32_flops / (peak / params.pe_fp32_factor)
    memory_ns = hbm_bytes / params.dma_bytes_per_ns
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
        hotspots=hotspots[:20])


def timeline_svg(trace, timeline: Timeline, *, width: int = 1600, title: str = "") -> str:
    """One lane per engine, one bar per instruction (DMAs: issue on the issue lane, transfer
    on the DMA lane), like neuron-profile's timeline view. Hover a bar for its source line."""
    lanes = [q for q in LANE_ORDER if q in timeline.busy_ns]
    lane_h, top, left = 28, 40, 130
    span = max(timeline.makespan_ns, 1.0)
    scale = (width - left - 20) / span
    height = top + lane_h * len(lanes) + 40
    y_of = {q: top + i * lane_h for i, q in enumerate(lanes)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20">{html.escape(title)} estimated {timeline.total_us:.1f} us '
           f'(+{timeline.overhead_ns / 1e3:.0f} us fixed overhead not drawn)</text>']
    for q in lanes:
        y = y_of[q]
        out.append(f'<text x="4" y="{y + 18}">{LANE_LABELS.get(q, q)}</text>'
                   f'<rect x="{left}" y="{y + 2}" width="{width - left - 20}" height="{lane_h - 4}" fill="#f5f5f5"/>')
    issue_lane = "DGE" if timeline.dma_mode == "dge" else "DMA-issue"

    def bar(q, start, end, rec):
        x = left + start * scale
        w = max((end - start) * scale, 0.5)
        tip = html.escape(f"{rec.opcode} {rec.site.short if rec.site else ''} {start / 1e3:.2f}-{end / 1e3:.2f} us")
        out.append(f'<rect x="{x:.2f}" y="{y_of[q] + 4}" width="{w:.2f}" height="{lane_h - 8}" '
                   f'fill="{COLORS.get(rec.opcode, "#607d8b")}"><title>{tip}</title></rect>')
    for rec, slot in zip(trace, timeline.slots):
        if slot.queue == "DMA":
            bar(issue_lane, slot.issue_start, slot.issue_end, rec)
            bar("DMA", slot.start, slot.end, rec)
        else:
            bar(slot.queue, slot.start, slot.end, rec)
    axis_y = top + lane_h * len(lanes) + 16
    for i in range(11):
        x = left + (width - left - 20) * i / 10
        out.append(f'<text x="{x:.0f}" y="{axis_y}" text-anchor="middle">{span * i / 10 / 1e3:.1f} us</text>')
    out.append("</svg>")
    return "\n".join(out)


def write_json(profile: Profile, path: str) -> None:
    with open(path, "w") as fh:
        json.dump(profile.to_json(), fh, indent=2)

"""The timeline picture: one lane per engine, the 16 DMA engines as lanes of their own, the
course thresholds as markers, a legend and the bottleneck verdict, as a standalone SVG.

Busy time is binned per pixel column, so a picture of 100k instructions is as small as one
of 1k: each lane keeps, per column, how long each opcode ran there; runs of columns with the
same dominant opcode and the same occupancy level (quarters) become one box, whose height
shows the occupancy and whose tooltip gives the span."""
from __future__ import annotations

import html
import math

import numpy as np

from .scheduler import Timeline

COLORS = {"nc_matmul": "#2e7d32", "nc_transpose": "#81c784", "tensor_copy": "#1565c0",
          "tensor_tensor": "#42a5f5", "tensor_scalar": "#90caf9", "tensor_reduce": "#7e57c2",
          "activation": "#ef6c00", "memset": "#9e9e9e", "dma_copy": "#c62828", "dma_transpose": "#e57373",
          "iota": "#6d4c41", "affine_select": "#8d6e63", "tensor_partition_reduce": "#5d4037",
          "device_print": "#000000", "hazard wait": "#ffb300"}
OTHER = "#607d8b"
ENGINE_LANES = (("PE", "Tensor (PE)"), ("DVE", "Vector (DVE)"), ("ACT", "Scalar (ACT)"),
                ("POOL", "GpSimd (POOL)"), ("SP", "Sync (SP)"), ("DGE-SP", "DGE from Sync"),
                ("DGE-ACT", "DGE from Scalar"), ("DMA-issue", "DMA issue"))
HAZARD_LANE = "hazard waits"
LANE_H, DMA_LANE_H, LEFT, RIGHT = 26, 11, 130, 45


class _Lane:
    """Busy time per opcode per pixel column of one lane."""

    def __init__(self, label: str, height: int, columns: int, ns_per_px: float) -> None:
        self.label, self.height = label, height
        self.columns, self.ns_per_px = columns, ns_per_px
        self.busy: dict[str, np.ndarray] = {}
        self.total_ns = 0.0

    def add(self, opcode: str, start: float, end: float) -> None:
        if end <= start:
            return
        self.total_ns += end - start
        row = self.busy.get(opcode)
        if row is None:
            row = self.busy[opcode] = np.zeros(self.columns)
        px = self.ns_per_px
        first, last = int(start // px), min(int(end // px), self.columns - 1)
        if first >= self.columns:
            return
        if first == last:
            row[first] += end - start
            return
        row[first] += (first + 1) * px - start
        row[first + 1:last] += px
        row[last] += min(end, (last + 1) * px) - last * px

    def boxes(self):
        """(first column, columns, opcode, occupancy level 1..4) of each merged box."""
        if not self.busy:
            return
        names = list(self.busy)
        stack = np.vstack([self.busy[n] for n in names])
        total = stack.sum(axis=0)
        level = np.minimum(np.ceil(total / self.ns_per_px * 4 - 1e-9), 4).astype(int)
        dominant = stack.argmax(axis=0)
        col = 0
        while col < self.columns:
            if level[col] <= 0:
                col += 1
                continue
            end = col + 1
            while end < self.columns and level[end] == level[col] and dominant[end] == dominant[col]:
                end += 1
            yield col, end - col, names[dominant[col]], int(level[col])
            col = end


def _lanes(trace, timeline: Timeline, columns: int, ns_per_px: float) -> list[_Lane]:
    queues = {q for q in timeline.busy_ns if q != "DMA"}
    if timeline.dma_mode == "dge" and timeline.dma_count:    # both DGE queues, an idle one too
        queues |= {"DGE-SP", "DGE-ACT"}
    lanes = {q: _Lane(label, LANE_H, columns, ns_per_px) for q, label in ENGINE_LANES if q in queues}
    for q in sorted(queues - set(lanes)):
        lanes[q] = _Lane(q, LANE_H, columns, ns_per_px)
    dma = [_Lane(f"DMA queue {i}", DMA_LANE_H, columns, ns_per_px) for i in range(timeline.params.dma_engines)] \
        if timeline.dma_count else []
    waits = _Lane(HAZARD_LANE, LANE_H, columns, ns_per_px) if timeline.hazard_count else None
    end_latency = timeline.params.dma_end_latency_ns
    for rec, slot in zip(trace, timeline.slots):
        if slot.queue == "DMA":
            issue = lanes.get(slot.issue_queue)
            if issue is not None:
                issue.add(rec.opcode, slot.issue_start, slot.issue_end)
            for q in slot.dma_queues:       # bytes move until the end latency starts
                dma[q].add(rec.opcode, slot.start, slot.end - end_latency)
            if waits is not None and slot.hazard_wait > 0:    # issued, then held until the hazard cleared
                waits.add("hazard wait", slot.issue_end, slot.issue_end + slot.hazard_wait)
        else:
            lanes[slot.queue].add(rec.opcode, slot.start, slot.end)
            if waits is not None and slot.hazard_wait > 0:
                waits.add("hazard wait", slot.start - slot.hazard_wait, slot.start)
    return list(lanes.values()) + ([waits] if waits is not None else []) + dma


# widest advance of a character of the picture's 12 px sans-serif text, as a share of the size:
# DejaVu Sans (a browser's usual sans-serif on Linux) averages ~0.55 em on English text and
# digits; 0.6 em keeps a wrapped line inside the picture in the wider fonts too
CHAR_EM = 0.6
LINE_H = 16


def wrap(text: str, width_px: float, size_px: float = 12) -> list[str]:
    """`text` in lines of at most `width_px` at `size_px` (CHAR_EM a character), broken at spaces."""
    per_line = max(20, int(width_px / (size_px * CHAR_EM)))
    lines, line = [], ""
    for word in text.split():
        while len(word) > per_line:              # a long path or number: broken where it must be
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:per_line])
            word = word[per_line:]
        if line and len(line) + 1 + len(word) > per_line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def _fmt_us(ns: float) -> str:
    return f"{ns / 1e3:.1f}"


def timeline_svg(trace, timeline: Timeline, *, width: int = 1400, title: str = "",
                 thresholds_us: dict | None = None, verdict: str = "") -> str:
    """The picture as SVG text. `thresholds_us` ({"optimized": 1002, "relaxed": 1365}) are
    drawn where the kernel's total latency (fixed overhead included) would reach them."""
    overhead = timeline.overhead_ns
    marks = {name: us * 1e3 - overhead for name, us in (thresholds_us or {}).items()
             if isinstance(us, (int, float)) and math.isfinite(us)}
    span = max([timeline.makespan_ns, 1.0] + [m * 1.03 for m in marks.values()])
    columns = width - LEFT - RIGHT
    ns_per_px = span / columns
    lanes = _lanes(trace, timeline, columns, ns_per_px)
    # the title and the verdict wrap to the picture's width; the lanes start below them
    text_w = width - LEFT - 8
    heading = wrap(f"{title} estimated {timeline.total_us:.1f} us (the {overhead / 1e3:.0f} us fixed overhead "
                   "is not drawn)", text_w)
    said = wrap(verdict, text_w) if verdict else []
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="HEIGHT" '
           f'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>']
    y = 18
    for line in heading:
        out.append(f'<text x="{LEFT}" y="{y}" font-weight="bold">{html.escape(line)}</text>')
        y += LINE_H
    if said:
        y += 4
        out.append(f'<text data-verdict="" x="{LEFT}" y="{y}">' + "".join(
            f'<tspan x="{LEFT}" dy="{0 if i == 0 else LINE_H}">{html.escape(line)}</tspan>'
            for i, line in enumerate(said)) + "</text>")
        y += LINE_H * (len(said) - 1)
    top = y + 36          # room for the threshold markers' two rows of labels above the lanes
    y = top
    for lane in lanes:
        share = lane.total_ns / max(timeline.makespan_ns, 1.0)
        out.append(f'<text x="4" y="{y + lane.height - 3}" font-size="{11 if lane.height > 12 else 9}">'
                   f'{html.escape(lane.label)}<title>{html.escape(lane.label)}: busy '
                   f'{_fmt_us(lane.total_ns)} us, {share:.0%} of the drawn span</title></text>'
                   f'<rect x="{LEFT}" y="{y + 1}" width="{columns}" height="{lane.height - 2}" fill="#f3f3f3"/>')
        for first, n, opcode, level in lane.boxes():
            h = (lane.height - 2) * level / 4
            t0, t1 = first * ns_per_px, (first + n) * ns_per_px
            out.append(f'<rect x="{LEFT + first}" y="{y + lane.height - 1 - h:.1f}" width="{n}" height="{h:.1f}" '
                       f'fill="{COLORS.get(opcode, OTHER)}"><title>{opcode} {_fmt_us(t0)}-{_fmt_us(t1)} us, '
                       f'{level * 25}% busy</title></rect>')
        y += lane.height
    for i, (name, at) in enumerate(sorted(marks.items(), key=lambda kv: kv[1])):
        x = LEFT + at / ns_per_px
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{y}" stroke="#d32f2f" '
                   f'stroke-dasharray="5,3" stroke-width="1.5"/>'
                   f'<text x="{x - 4:.1f}" y="{top - 8 - 12 * (i % 2)}" text-anchor="end" fill="#d32f2f">'
                   f'{html.escape(name)} {(at + overhead) / 1e3:.0f} us</text>')
    y += 16
    for i in range(11):
        x = LEFT + columns * i / 10
        out.append(f'<text x="{x:.0f}" y="{y}" text-anchor="middle">{_fmt_us(span * i / 10)} us</text>')
    y += 22
    used = sorted({op for lane in lanes for op in lane.busy})
    x = LEFT
    for opcode in used:
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLORS.get(opcode, OTHER)}"/>'
                   f'<text x="{x + 16}" y="{y}">{opcode}</text>')
        x += 30 + 7 * len(opcode)
    out.append(f'<text x="{x + 10}" y="{y}" fill="#555">box height = share of the pixel busy</text>')
    out.append("</svg>")
    out[0] = out[0].replace("HEIGHT", str(y + 12))
    return "\n".join(out)

"""Charts as server-rendered SVG text, so pages need no JavaScript library and work offline.

Every function takes plain numbers and returns markup-safe SVG; nothing here touches the
database or a request. Values that are missing or not finite are drawn as gaps, never as 0."""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup, escape

from grader.vocabulary import Tier

FONT = 'font-family="system-ui, sans-serif" font-size="12"'
COLORS = {"p99": "#1565c0", Tier.OPTIMIZED: "#2e7d32", Tier.RELAXED: "#ef6c00", "implied": "#7e57c2",
          "drift": "#c62828", "line": "#1565c0", "grid": "#e0e0e0", "text": "#212121"}


CHAR_W = 7.0      # a generous average glyph width of the 12 px sans-serif, for fitting text


def nice_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """Round tick values from low up to at least high (0, 20, 40, 60, 80 for 0..70): a step of 1,
    2, 2.5 or 5 times a power of ten, at most `most` ticks."""
    span = high - low
    if span <= 0:
        return [low, low + 1.0]
    for step in sorted(m * 10.0 ** e for e in range(math.floor(math.log10(span / most)) - 1,
                                                      math.floor(math.log10(span)) + 2)
                       for m in (1, 2, 2.5, 5)):
        start = math.floor(low / step) * step
        count = math.ceil((high - start) / step - 1e-9) + 1
        if count <= most:
            return [start + i * step for i in range(count)]
    return [low, high]


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _num(value: float) -> str:
    return f"{value:.1f}"


def _svg(width: int, height: int, body: list[str], label: str) -> Markup:
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
                  f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" {FONT}>'
                  f'<title>{escape(label)}</title>{"".join(body)}</svg>')


# ----- p99 against the two thresholds, one row per timed test -----

@dataclass(frozen=True)
class TimingRow:
    label: str
    p99_us: float | None
    optimized_us: float | None
    relaxed_us: float | None


def p99_chart(rows: list[TimingRow], width: int = 760) -> Markup:
    """A horizontal bar per test (its p99) with the optimized (green) and relaxed (orange)
    thresholds as ticks. Each row has its own scale: the tests' times differ by 50x."""
    label_w, row_h, top = 290, 34, 26
    bar_w = width - label_w - 90
    body = [_legend([("p99", COLORS["p99"]), ("optimized threshold", COLORS[Tier.OPTIMIZED]),
                     ("relaxed threshold", COLORS[Tier.RELAXED])], x=label_w)]
    for i, row in enumerate(rows):
        y = top + i * row_h
        known = [v for v in (row.p99_us, row.optimized_us, row.relaxed_us) if _finite(v)]
        scale = bar_w / (max(known) * 1.15) if known and max(known) > 0 else 0
        fits = int((label_w - 16) / CHAR_W)          # what fits left of the bars at 12 px
        short = _shortened(row.label, fits)
        body.append(f'<text x="{label_w - 8}" y="{y + 17}" text-anchor="end" fill="{COLORS["text"]}">'
                    f'<title>{escape(row.label)}</title>{escape(short)}</text>')
        body.append(f'<rect x="{label_w}" y="{y + 4}" width="{bar_w}" height="20" fill="#f5f5f5"/>')
        if _finite(row.p99_us):
            body.append(f'<rect class="p99" x="{label_w}" y="{y + 6}" width="{_num(row.p99_us * scale)}" '
                        f'height="16" fill="{COLORS["p99"]}"/>')
            body.append(f'<text x="{label_w + bar_w + 6}" y="{y + 17}">{_num(row.p99_us)} us</text>')
        else:
            body.append(f'<text x="{label_w + 6}" y="{y + 17}" fill="#757575">not timed</text>')
        for name in (Tier.OPTIMIZED, Tier.RELAXED):
            value = getattr(row, f"{name}_us")
            if _finite(value):
                x = label_w + value * scale
                body.append(f'<line class="{name}" x1="{_num(x)}" x2="{_num(x)}" y1="{y + 1}" y2="{y + 27}" '
                            f'stroke="{COLORS[name]}" stroke-width="3"><title>{name} threshold '
                            f'{_num(value)} us</title></line>')
    return _svg(width, top + len(rows) * row_h + 8, body, "p99 latency against the thresholds")


def _shortened(text: str, fits: int) -> str:
    """Cut from the middle: titles of one kind share their start and differ at the end
    ("..., float32" / "..., float16"), so both ends stay."""
    if len(text) <= fits:
        return text
    tail = (fits - 1) // 2
    return text[:fits - 1 - tail].rstrip() + "\u2026" + text[-tail:].lstrip()


def _legend(items: list[tuple[str, str]], x: int, y: int = 12) -> str:
    parts = []
    for name, color in items:
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{x + 14}" y="{y}">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    return "".join(parts)


# ----- a value over time: the student's score history, nightly p99s -----

@dataclass(frozen=True)
class Point:
    when: datetime
    value: float | None
    marked: bool = False          # drawn red: a drifted night, a flagged run


@dataclass(frozen=True)
class Guide:
    label: str
    value: float
    color: str
    dashed: bool = False


def time_chart(points: list[Point], *, title: str, unit: str = "", guides: tuple[Guide, ...] = (),
               width: int = 760, height: int = 220, y_from_zero: bool = True) -> Markup:
    """Dots joined by a line over time, with horizontal guide lines (a maximum, thresholds)."""
    left, right, top, bottom = 60, 150, 24, 28
    values = [p.value for p in points if _finite(p.value)] + [g.value for g in guides if _finite(g.value)]
    body = [f'<text x="{left}" y="14" font-weight="600">{escape(title)}</text>']
    if not values or not points:
        body.append(f'<text x="{left}" y="{height // 2}" fill="#757575">nothing to show yet</text>')
        return _svg(width, height, body, title)
    ticks = nice_ticks(0.0 if y_from_zero else min(values), max(values))
    low, high = ticks[0], ticks[-1]
    if high <= low:
        high = low + 1.0
    times = [p.when.timestamp() for p in points]
    t0, t1 = min(times), max(times)
    span = (t1 - t0) or 1.0
    plot_w, plot_h = width - left - right, height - top - bottom

    def x_of(t: float) -> float:
        return left + (t - t0) / span * plot_w if t1 > t0 else left + plot_w / 2

    def y_of(v: float) -> float:
        return top + plot_h - (v - low) / (high - low) * plot_h

    for v in ticks:
        body.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{_num(y_of(v))}" y2="{_num(y_of(v))}" '
                    f'stroke="{COLORS["grid"]}"/><text x="{left - 6}" y="{_num(y_of(v) + 4)}" '
                    f'text-anchor="end">{v:.4g}</text>')
    first, last = min(points, key=lambda p: p.when).when, max(points, key=lambda p: p.when).when
    label_w = 16 * CHAR_W                           # '2026-11-25 07:00'
    ends = [(first, "start"), (last, "end")] if x_of(last.timestamp()) - x_of(first.timestamp()) > 2.2 * label_w \
        else [(last, "middle")]                     # one point, or two too close to label apart
    for when, anchor in ends:
        body.append(f'<text x="{_num(x_of(when.timestamp()))}" y="{height - 8}" text-anchor="{anchor}" '
                    f'fill="#757575">{when:%Y-%m-%d %H:%M}</text>')
    for guide in guides:
        if _finite(guide.value):
            y = _num(y_of(guide.value))
            dash = ' stroke-dasharray="6 4"' if guide.dashed else ""
            body.append(f'<line class="guide" x1="{left}" x2="{left + plot_w}" y1="{y}" y2="{y}" '
                        f'stroke="{guide.color}" stroke-width="2"{dash}/>'
                        f'<text x="{left + plot_w + 6}" y="{_num(float(y) + 4)}" fill="{guide.color}">'
                        f'{escape(guide.label)} {guide.value:.4g}{escape(unit)}</text>')
    drawn = [(x_of(p.when.timestamp()), y_of(p.value), p) for p in points if _finite(p.value)]
    if len(drawn) > 1:
        path = " ".join(f"{_num(x)},{_num(y)}" for x, y, _ in drawn)
        body.append(f'<polyline points="{path}" fill="none" stroke="{COLORS["line"]}" stroke-width="1.5"/>')
    for x, y, p in drawn:
        color = COLORS["drift"] if p.marked else COLORS["line"]
        body.append(f'<circle class="{"marked" if p.marked else "point"}" cx="{_num(x)}" cy="{_num(y)}" '
                    f'r="{5 if p.marked else 3.5}" fill="{color}"><title>{p.when:%Y-%m-%d %H:%M}: '
                    f'{p.value:.4g}{escape(unit)}{" (marked)" if p.marked else ""}</title></circle>')
    return _svg(width, height, body, title)

"""Server-drawn charts: round y ticks that reach the maximum, x labels that never overlap."""
from __future__ import annotations

import datetime as dt
import re

from web.charts import Guide, Point, nice_ticks, time_chart


def test_ticks_are_round_and_cover_the_values():
    assert nice_ticks(0, 70) == [0, 20, 40, 60, 80]
    assert nice_ticks(0, 60) == [0, 20, 40, 60]
    assert nice_ticks(0, 7.5) == [0, 2, 4, 6, 8]
    for low, high in ((0, 1), (0, 4610), (980, 1400), (0, 0.3), (3, 3.5)):
        ticks = nice_ticks(low, high)
        assert ticks[0] <= low and ticks[-1] >= high - 1e-9 and 2 <= len(ticks) <= 5


def test_score_chart_labels_a_single_point_once_with_round_ticks():
    when = dt.datetime(2026, 11, 25, 7, 0)
    svg = str(time_chart([Point(when, 65.0)], title="Your score over time",
                         guides=(Guide("maximum", 70, "#2e7d32", True),)))
    assert svg.count("2026-11-25 07:00</text>") == 1
    ticks = re.findall(r'text-anchor="end">([0-9.]+)</text>', svg)
    assert ticks == ["0", "20", "40", "60", "80"]
    two = str(time_chart([Point(when - dt.timedelta(days=1), 40.0), Point(when, 65.0)], title="t"))
    assert "2026-11-24 07:00</text>" in two and "2026-11-25 07:00</text>" in two


def test_p99_rows_whose_titles_differ_at_the_end_stay_told_apart():
    """Walked as a student: four rows read "Performance: 224x224, no maxpool, floa…" twice (the
    dtype, the one difference, was what the cut dropped). A long title loses its middle."""
    from web.charts import TimingRow, p99_chart
    titles = [f"Performance: 224x224, {pool}, {dtype}" for pool in ("no maxpool", "maxpool")
              for dtype in ("float32", "float16")] + ["Extra credit: matrix_transpose 4096x4096 under 700 us"]
    svg = str(p99_chart([TimingRow(t, 100.0, 120.0, 150.0) for t in titles]))
    shown = re.findall(r"</title>([^<]*)</text>", svg)
    assert len(shown) == len(titles) and len(set(shown)) == len(titles), shown
    for title, text in zip(titles, shown):
        assert text == title or ("\u2026" in text and title.startswith(text.split("\u2026")[0])
                                 and title.endswith(text.split("\u2026")[1]))
    assert any(text.endswith("float32") for text in shown if "\u2026" in text)

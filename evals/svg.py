"""Tiny inline-SVG charts for the HTML report: step lines (CDFs) and grouped bars.

No plotting library, no scripts: each function returns one `<svg>` element as a string.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
GRID = 'stroke="#e5e7eb"'
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return float(step * exp)
    return float(10 * exp)


def _ticks(top: float, n: int = 5) -> list[float]:
    return [top * i / n for i in range(n + 1)]


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 10 or v == int(v) else f"{v:.2g}"


def cdf_chart(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    x_label: str,
    width: int = 560,
    height: int = 300,
) -> str:
    """Empirical CDFs as step lines: y = share of requests at or below x."""
    left, right, top, bottom = 48, 16, 28, 42
    pw, ph = width - left - right, height - top - bottom
    values = [v for s in series.values() for v in s]
    x_max = _nice_max(max(values) if values else 1.0)

    def sx(x: float) -> float:
        return left + pw * x / x_max

    def sy(y: float) -> float:
        return top + ph * (1 - y)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" {FONT}>',
        f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    for t in _ticks(x_max):
        x = sx(t)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#e5e7eb"/>'
        )
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">{_fmt(t)}</text>')
    for t in (0, 0.25, 0.5, 0.75, 0.95, 1.0):
        y = sy(t)
        dash = ' stroke-dasharray="3 3"' if t == 0.95 else ""
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e7eb"{dash}/>'
        )
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">{escape(x_label)}</text>'
    )
    for i, (name, sample) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        ordered = sorted(sample)
        if ordered:
            n = len(ordered)
            points = [f"{sx(0):.1f},{sy(0):.1f}"]
            for j, v in enumerate(ordered):
                points.append(f"{sx(v):.1f},{sy(j / n):.1f}")
                points.append(f"{sx(v):.1f},{sy((j + 1) / n):.1f}")
            points.append(f"{sx(x_max):.1f},{sy(1):.1f}")
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                f'points="{" ".join(points)}"><title>{escape(name)}</title></polyline>'
            )
        # legend in the upper left, which a CDF leaves empty
        ly = top + 14 + 16 * i
        parts.append(f'<rect x="{left + 8}" y="{ly - 9}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{left + 22}" y="{ly}">{escape(name)} (n={len(ordered)})</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(
    groups: Sequence[tuple[str, Mapping[str, float | None]]],
    metrics: Sequence[str],
    *,
    title: str,
    width: int = 560,
    max_value: float = 1.0,
) -> str:
    """Grouped horizontal bars: one group per slice value, one bar per metric (0..max_value)."""
    left, right, top = 170, 56, 28
    bar, gap = 12, 10
    group_h = bar * len(metrics) + gap
    legend_h = 16 * len(metrics) + 6
    height = top + group_h * len(groups) + 24 + legend_h
    pw = width - left - right

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" {FONT}>',
        f'<text x="8" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    axis_y = top + group_h * len(groups)
    for t in _ticks(max_value, 4):
        x = left + pw * t / max_value
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{axis_y}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle">{t:g}</text>')
    for g, (label, values) in enumerate(groups):
        y0 = top + g * group_h
        parts.append(
            f'<text x="{left - 8}" y="{y0 + group_h / 2:.1f}" text-anchor="end" '
            f'font-weight="600">{escape(label)}</text>'
        )
        for m, metric in enumerate(metrics):
            value = values.get(metric)
            y = y0 + m * bar
            if value is None:
                parts.append(f'<text x="{left + 4}" y="{y + bar - 2}" fill="#9ca3af">n/a</text>')
                continue
            w = pw * max(0.0, min(value, max_value)) / max_value
            color = PALETTE[m % len(PALETTE)]
            parts.append(
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 2}" fill="{color}">'
                f"<title>{escape(label)} · {escape(metric)}: {value:.3f}</title></rect>"
            )
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + bar - 3}">{value:.3f}</text>')
    for m, metric in enumerate(metrics):
        ly = axis_y + 34 + 16 * m
        parts.append(
            f'<rect x="{left}" y="{ly - 9}" width="10" height="10" '
            f'fill="{PALETTE[m % len(PALETTE)]}"/>'
        )
        parts.append(f'<text x="{left + 14}" y="{ly}">{escape(metric)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram_range(values: Sequence[float], tail: float = 0.1) -> float:
    """The low end of a histogram of values in [0, 1]: the `tail` quantile floored to a
    hundredth (at most 0.9), so a few outliers far below do not squeeze the rest into one bar."""
    if not values:
        return 0.0
    ordered = sorted(min(1.0, max(0.0, v)) for v in values)
    q = ordered[min(len(ordered) - 1, int(tail * len(ordered)))]
    return min(0.9, math.floor(q * 100) / 100)


def histogram_counts(values: Sequence[float], bins: int, lo: float) -> tuple[int, list[int]]:
    """(values under `lo`, counts of [lo, 1] in `bins` equal-width bins)."""
    span = 1.0 - lo
    counts = [0] * bins
    under = 0
    for v in values:
        if v < lo:
            under += 1
            continue
        counts[min(bins - 1, max(0, int((min(v, 1.0) - lo) / span * bins)))] += 1
    return under, counts


def histogram(
    values: Sequence[float],
    *,
    title: str,
    bins: int = 20,
    width: int = 560,
    height: int = 220,
    x_label: str = "groundedness score",
) -> str:
    """Counts of values in [0, 1] by equal-width bins over [lo, 1], lo from `histogram_range`:
    values crowded near 1 show their spread, not one bar; those under lo get a bar of their own
    on the left (`< lo`)."""
    left, right, top, bottom = 40, 16, 28, 40
    pw, ph = width - left - right, height - top - bottom
    lo = histogram_range(values)
    span = 1.0 - lo
    under, counts = histogram_counts(values, bins, lo)
    c_max = max([*counts, under]) if values else 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" {FONT}>',
        f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    slots = bins + (1 if under else 0)
    bw = pw / slots
    x0 = left + (bw if under else 0)
    if under:
        h = ph * under / c_max
        parts.append(
            f'<rect x="{left + 1:.1f}" y="{top + ph - h:.1f}" width="{bw - 2:.1f}" '
            f'height="{h:.1f}" fill="{PALETTE[7]}"><title>&lt; {lo:g}: {under}</title></rect>'
            f'<text x="{left + bw / 2:.1f}" y="{top + ph - h - 3:.1f}" '
            f'text-anchor="middle">{under}</text>'
            f'<text x="{left + bw / 2:.1f}" y="{top + ph + 14}" text-anchor="middle">&lt;</text>'
        )
    for i, c in enumerate(counts):
        h = ph * c / c_max if c_max else 0
        x = x0 + i * bw
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{top + ph - h:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" '
            f'fill="{PALETTE[0]}"><title>{lo + span * i / bins:.3f}–'
            f"{lo + span * (i + 1) / bins:.3f}: {c}</title></rect>"
        )
        if c:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{top + ph - h - 3:.1f}" '
                f'text-anchor="middle">{c}</text>'
            )
    for i in range(0, bins + 1, max(1, bins // 5)):
        x = x0 + i * bw
        tick = round(lo + span * i / bins, 3)
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">{tick:g}</text>')
    parts.append(
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#6b7280"/>'
    )
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 × powers of ten between lo and hi (at least the two ends)."""
    ticks = [
        m * 10**e
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
        if lo <= m * 10**e <= hi
    ]
    return ticks or [lo, hi]


def _fmt_big(v: float) -> str:
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    caption: str = "",
    width: int = 640,
    height: int = 340,
) -> str:
    """Lines with markers on log-log axes: one line per series of (x, y) points (x, y > 0)."""
    left, right, top, bottom = 56, 190, 28, 58
    extra = 14 * max(0, len(caption.splitlines()) - 1)  # caption lines below the first
    pw, ph = width - left - right, height - top - bottom
    xs = [x for s in series.values() for x, _ in s] or [1.0, 10.0]
    ys = [y for s in series.values() for _, y in s] or [1.0, 10.0]
    x_lo, x_hi = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
    y_lo = 10 ** math.floor(math.log10(max(min(ys), 1e-3)))
    y_hi = 10 ** math.ceil(math.log10(max([*ys, y_lo * 10])))

    def sx(x: float) -> float:
        return left + pw * math.log10(x / x_lo) / math.log10(x_hi / x_lo)

    def sy(y: float) -> float:
        return top + ph * (1 - math.log10(max(y, y_lo) / y_lo) / math.log10(y_hi / y_lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height + extra}" '
        f'width="{width}" height="{height + extra}" role="img" aria-label="{escape(title)}" '
        f"{FONT}>",
        f'<rect width="{width}" height="{height + extra}" fill="#ffffff"/>',
        f'<text x="{left}" y="16" font-size="13" font-weight="600">{escape(title)}</text>',
    ]
    for t in _log_ticks(x_lo, x_hi):
        x = sx(t)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#e5e7eb"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">{_fmt_big(t)}</text>'
        )
    for t in _log_ticks(y_lo, y_hi):
        y = sy(t)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#e5e7eb"/>'
        )
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    parts.append(
        f'<text x="{left + pw / 2}" y="{top + ph + 32}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    parts.append(
        f'<text x="14" y="{top + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + ph / 2})">{escape(y_label)}</text>'
    )
    for i, (name, points) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="5 3"' if i % 2 else ""
        pts = sorted(points)
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        for x, y in pts:
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}">'
                f"<title>{escape(name)}: {_fmt_big(x)} → {y:.3g}</title></circle>"
            )
        ly = top + 8 + 18 * i
        lx = left + pw + 12
        parts.append(
            f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{lx + 24}" y="{ly + 4}">{escape(name)}</text>')
    for k, line in enumerate(caption.splitlines()):  # one line per run drawn
        y = height - 8 + 14 * k
        parts.append(f'<text x="{left}" y="{y}" fill="#4b5563">{escape(line)}</text>')
    parts.append("</svg>")
    return "".join(parts)

"""Server-side SVG charts (no JavaScript, no CDN): the dashboard renders offline."""

from __future__ import annotations

import html

PALETTE = ["#2b8a3e", "#1971c2", "#e8590c", "#862e9c", "#c92a2a", "#5c940d"]


def bar_chart(title: str, bars: list[tuple[str, float, str | None]], unit: str, width: int = 640,
              height: int = 220) -> str:
    """Bars of (label, value, series); a missing (unpriced) value is drawn as a hatched stub."""
    if not bars:
        return f'<svg class="chart empty" width="{width}" height="40"><text x="4" y="24">{html.escape(title)}: no data</text></svg>'
    top = max(v for _, v, _ in bars) or 1.0
    step = (width - 60) / len(bars)
    series = sorted({s or "" for _, _, s in bars})
    parts = [f'<svg class="chart" role="img" aria-label="{html.escape(title)}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{html.escape(title)}</title>'
             f'<text x="4" y="14" font-size="12">{html.escape(title)} ({html.escape(unit)}, max {top:.4g})</text>']
    for i, (label, value, s) in enumerate(bars):
        h = (height - 50) * value / top
        color = PALETTE[series.index(s or "") % len(PALETTE)]
        parts.append(f'<rect class="bar" data-value="{value:.6g}" x="{40 + i * step:.1f}" y="{height - 30 - h:.1f}" '
                     f'width="{max(1.0, step * 0.8):.1f}" height="{h:.1f}" fill="{color}">'
                     f'<title>{html.escape(label)}: {value:.4g} {html.escape(unit)}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)

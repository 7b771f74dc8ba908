"""Quantities as every view prints them: three significant figures in the unit, chosen per
magnitude, that puts digits before the point, with its symbol (``57.3 mg``, ``220 mWh``), never
``0.000000 kgCO2eq`` nor ``1.9e-05``; zero reads ``0 g``; an unknown value reads as the caller
says (``-`` by default).

Emissions are masses of CO2-equivalent: a column or sentence says "CO2eq" once, the cells carry
the mass. Compute time is told in the hours of what trained: ``CPU-hours`` for a CPU run (an
agent's accounting calls them ``gpu_hours`` whatever the device), ``GPU-hours`` otherwise.
"""

from __future__ import annotations

import math

# (symbol, how many of it make the base unit), largest first
MASS = (("t", 1e6), ("kg", 1e3), ("g", 1.0), ("mg", 1e-3), ("µg", 1e-6), ("ng", 1e-9))
ENERGY = (("MWh", 1e6), ("kWh", 1e3), ("Wh", 1.0), ("mWh", 1e-3), ("µWh", 1e-6))


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures, in plain decimals."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def _scaled(value: float, scale: tuple[tuple[str, float], ...]) -> str:
    if value == 0:
        base = next(symbol for symbol, size in scale if size == 1.0)
        return f"0 {base}"
    symbol, size = next(((s, f) for s, f in scale if abs(value) >= f), scale[-1])
    return f"{significant(value / size)} {symbol}"


def mass(grams: float | None, unknown: str = "-") -> str:
    """A mass given in grams: ``57.3 mg``, ``12.1 g``, ``1.50 kg``."""
    return unknown if grams is None else _scaled(grams, MASS)


def energy(wh: float | None, unknown: str = "-") -> str:
    """An energy given in watt-hours: ``220 mWh``, ``1.50 Wh``, ``3.20 kWh``."""
    return unknown if wh is None else _scaled(wh, ENERGY)


def compute_hours(hours: float | None, device: str | None, unknown: str = "-") -> str:
    """``0.0534 CPU-hours`` for a run on the CPU, ``1.20 GPU-hours`` otherwise."""
    if hours is None:
        return unknown
    kind = "CPU" if device == "cpu" else "GPU"
    return f"{significant(hours)} {kind}-hours"

"""One kind of intensity per deployment: signals and emission factors are never mixed.

A plan compares regions' forecasts hour against hour, and a disclosure adds their hours up; both
are meaningful only when every forecast measures the same quantity. Average (location-based) and
marginal (the plant that answers one more kWh) intensities are different quantities, and the same
grid's average differs with the emission factors (Electricity Maps, DE, 2023-01-01 00:00: direct
140.5, life-cycle 185.8 g/kWh). No conversion between them is documented by the providers, so
none is made here:

* **signal**: every region of the registry must be fed by sources of one signal (the registry is
  refused at start otherwise, :func:`deployment_signal`);
* **emission factors**: the deployment names its factors once (``METATUNE_EMISSION_FACTORS``);
  a source whose factors differ is refused at start (:func:`deployment_signal`), and a
  provider that states its factors in each response is checked on every response
  (:func:`check_answered_factors`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from metatune.errors import ConfigurationError

from .providers import EmissionFactors, Signal, SourceMisconfigured

FACTORS_SETTING = "METATUNE_EMISSION_FACTORS"
LABEL = {EmissionFactors.direct: "direct", EmissionFactors.lifecycle: "life-cycle"}


@dataclass(frozen=True)
class RegionKind:
    """What a region's forecasts will measure: its source's name, signal and emission factors."""

    region: str
    source: str
    signal: Signal
    factors: EmissionFactors


def deployment_signal(kinds: Iterable[RegionKind], factors: EmissionFactors) -> Signal:
    """The one signal of every region (average for none), all of them on the deployment's
    ``factors``; a one-line ConfigurationError naming the region whose source gives other factors,
    or the regions of each signal when the registry mixes them."""
    by_signal: dict[Signal, list[RegionKind]] = {}
    for kind in kinds:
        mismatch = factors_mismatch(kind.source, kind.factors, factors)
        if mismatch:
            raise ConfigurationError(f"region {kind.region}: {mismatch}")
        by_signal.setdefault(kind.signal, []).append(kind)
    if len(by_signal) > 1:
        parts = "; ".join(
            f"{signal}: " + ", ".join(f"{k.region} ({k.source})" for k in by_signal[signal])
            for signal in sorted(by_signal)
        )
        raise ConfigurationError(
            f"the registry mixes average and marginal intensities ({parts}): a plan compares one "
            "kind, so give every region's datacenters sources of the same signal"
        )
    return next(iter(by_signal), Signal.average)


def factors_mismatch(source: str, gives: EmissionFactors, wanted: EmissionFactors) -> str | None:
    """Why a source that gives ``gives`` factors cannot serve a deployment on ``wanted`` ones
    (one line naming the setting), or None."""
    if gives == wanted:
        return None
    return (
        f"{source} gives {LABEL[gives]} intensities and {FACTORS_SETTING} is {wanted}: a "
        f"deployment uses one kind of emission factors; set {FACTORS_SETTING}={gives} (every "
        "region's source must then give them) or choose another source"
    )


def check_answered_factors(provider: str, answered: object, asked: EmissionFactors) -> None:
    """A provider's response said its figures use ``answered`` factors (its own spelling, e.g.
    Electricity Maps' ``emissionFactorType``); a :class:`SourceMisconfigured` when they are not
    those asked for, so they never enter the zone's history. ``None`` (not stated) passes."""
    if answered is None:
        return
    spelled = str(answered).strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    if spelled != asked.value:
        raise SourceMisconfigured(
            f"{provider} answered {answered!r} emission factors to a request for {LABEL[asked]} "
            f"ones ({FACTORS_SETTING}={asked}): refused, nothing stored"
        )

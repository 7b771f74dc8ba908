"""Carbon-intensity forecast contract: 168 hourly values per grid region."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import AwareDatetime, Field, model_validator

from .base import Contract, Event

if TYPE_CHECKING:  # numpy is imported where a forecast is priced, not wherever a contract is read
    import numpy as np
    from numpy.typing import ArrayLike

HORIZON_HOURS = 168


def expected_intensity(p10: ArrayLike, median: ArrayLike, p90: ArrayLike) -> np.ndarray:
    """The mean of a forecast distribution from its 10th, 50th and 90th percentiles (Swanson's
    rule, 0.3 / 0.4 / 0.3): what minimising *expected* emissions should plan on. It differs
    from the median where the distribution is skewed, as on near-zero grids whose spikes go up."""
    import numpy as np

    return np.asarray(
        0.3 * np.asarray(p10, dtype=float)
        + 0.4 * np.asarray(median, dtype=float)
        + 0.3 * np.asarray(p90, dtype=float)
    )


class ObservedHour(Contract):
    """One hour's observed (measured, not forecast) intensity of a grid region."""

    hour: AwareDatetime = Field(description="start of the hour, UTC")
    g_per_kwh: float = Field(ge=0, allow_inf_nan=False, description="observed gCO2eq/kWh")


class ObservedIntensity(Contract):
    """The observed intensity of a region's recent hours, as its source reported them: what
    accounting re-prices past job-hours with once they are observed (realised emissions)."""

    source: str = Field(min_length=1, description="where the observations come from")
    signal: Literal["average", "marginal"] = Field(
        "average",
        description="average (location-based, what disclosures use) or marginal intensity",
    )
    hours: list[ObservedHour] = Field(
        default_factory=list, description="observed hours before the forecast's start, oldest first"
    )


class CarbonForecast(Event):
    region: str = Field(min_length=1, description="grid region (Electricity Maps zone id)")
    issued_at: AwareDatetime = Field(description="when the forecast was made")
    start: AwareDatetime = Field(description="first hour covered (aligned to the hour, UTC)")
    model_version: str = Field(description="version of the forecasting model")
    stale: bool = Field(
        False, description="the last good forecast, shifted, because the provider failed"
    )
    g_per_kwh: list[float] = Field(description="median carbon intensity per hour, gCO2eq/kWh")
    p10_g_per_kwh: list[float] = Field(description="10th percentile per hour, gCO2eq/kWh")
    p90_g_per_kwh: list[float] = Field(description="90th percentile per hour, gCO2eq/kWh")
    imputed_hours: list[int] = Field(
        default_factory=list, description="hour offsets with imputed weather"
    )
    source: str = Field(
        "replay",
        min_length=1,
        description="where the intensity history came from: replay (the embedded 2023 extract) "
        "or a live source (electricity-maps, watttime, uk-carbon-intensity, carbon-aware-sdk, "
        "eia-930)",
    )
    signal: Literal["average", "marginal"] = Field(
        "average",
        description="the kind of intensity in every band: average (location-based) or marginal; "
        "never a mix",
    )
    emission_factors: Literal["direct", "lifecycle"] = Field(
        "direct",
        description="the emission factors of every band: direct (combustion at the plant) or "
        "lifecycle; one per deployment (METATUNE_EMISSION_FACTORS), never a mix",
    )
    provider_hours: int = Field(
        0,
        ge=0,
        le=HORIZON_HOURS,
        description="hours whose median blends the source's own forecast with the model's",
    )
    history_hours: int | None = Field(
        None,
        ge=0,
        description="observed hours of the 8 weeks before start the forecast was made from",
    )
    short_history: bool = Field(
        False,
        description="made from less history than the model uses (a zone still building its "
        "history): less reliable than usual",
    )
    observed: ObservedIntensity | None = Field(
        None,
        description="the region's observed intensity of recent hours before start (older "
        "producers leave it out)",
    )

    def expected_g_per_kwh(self) -> np.ndarray:
        """Hourly expected intensity (see :func:`expected_intensity`)."""
        return expected_intensity(self.p10_g_per_kwh, self.g_per_kwh, self.p90_g_per_kwh)

    @model_validator(mode="after")
    def _shape(self) -> CarbonForecast:
        if self.start.minute or self.start.second or self.start.microsecond:
            raise ValueError("start must be aligned to the hour")
        n = len(self.g_per_kwh)
        if n != HORIZON_HOURS or len(self.p10_g_per_kwh) != n or len(self.p90_g_per_kwh) != n:
            raise ValueError(f"a forecast has {HORIZON_HOURS} hourly values in each band")
        for lo, mid, hi in zip(self.p10_g_per_kwh, self.g_per_kwh, self.p90_g_per_kwh, strict=True):
            if not (0 <= lo <= mid <= hi):
                raise ValueError("bands must satisfy 0 <= p10 <= median <= p90")
        for observed in self.observed.hours if self.observed else []:
            if observed.hour >= self.start or observed.hour.minute or observed.hour.second:
                raise ValueError("observed hours are aligned to the hour and before start")
        return self

"""What priced an hour: the disclosure lists the job-hours whose forecast price came from a stale
or short-history forecast, and says the emission factors (direct or lifecycle) of each observed
intensity it priced an hour at. Both are stored per forecast hour and per observed hour
(telemetry_0011, telemetry_0012), and backfilled from the event log when those migrations run."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.disclosure.adapters.queries import study_disclosure
from metatune_telemetry.disclosure.domain.formats import run_rows, to_csv, to_markdown
from metatune_telemetry.ingest.adapters.writer import EventWriter
from tests.support.samples import NOW

from .realised_run import FORECAST, REALISED, REGISTRY, H, completed_subject, incoming, recorded_run
from .recording import roll_back

FLAGS = "telemetry_0011_forecast_flags"
FACTORS = "telemetry_0012_observed_factors"


def forecast(
    issued_at: datetime,
    first: list[float],
    *,
    start: datetime | None = None,
    stale: bool = False,
    short_history: bool = False,
    observed: tuple[tuple[int, float], ...] = (),
    factors: str = "direct",
) -> c.CarbonForecast:
    """A forecast of DE whose first hours' medians are ``first`` (250 after), each band +-10, so
    each hour's price (0.3 p10 + 0.4 median + 0.3 p90) is its median."""
    median = [*first, *[250.0] * (168 - len(first))]
    return c.CarbonForecast(
        occurred_at=start or issued_at,
        region="DE",
        issued_at=issued_at,
        start=start or issued_at,
        model_version="test",
        stale=stale,
        short_history=short_history,
        emission_factors=factors,
        g_per_kwh=median,
        p10_g_per_kwh=[g - 10 for g in median],
        p90_g_per_kwh=[g + 10 for g in median],
        observed=c.ObservedIntensity(
            source="electricitymaps",
            hours=[c.ObservedHour(hour=NOW + i * H, g_per_kwh=g) for i, g in observed],
        )
        if observed
        else None,
    )


# The run charged hours 0, 1, 2 at FORECAST (300, 100, 200 g/kWh):
FRESH = forecast(NOW, [FORECAST[0], FORECAST[1], 260.0])  # priced hours 0 and 1
# the provider down at hour 1: the forecaster serves FRESH again, shifted, stale (its issue kept);
# the agent's price of hour 1 is the same, but it came from a stale forecast
STALE = forecast(NOW, [FORECAST[1], 260.0], start=NOW + H, stale=True)
SHORT = forecast(NOW + 2 * H, [FORECAST[2]], short_history=True)  # priced hour 2
# hours 0 and 1 observed later, on life-cycle emission factors
OBSERVED = forecast(
    NOW + 3 * H, [], observed=((0, REALISED[0]), (1, REALISED[1])), factors="lifecycle"
)


def published(*forecasts: c.CarbonForecast) -> list[tuple[str, c.Event]]:
    return [(subjects.forecasts("DE"), f) for f in forecasts]


@pytest.mark.parametrize("one_batch", [True, False], ids=["one batch", "batch by batch"])
async def test_hours_priced_from_stale_or_short_history_forecasts_are_listed(
    db, one_batch: bool
) -> None:
    events, done, _ = recorded_run()
    writer = EventWriter(db)
    forecasts = published(FRESH, STALE, SHORT, OBSERVED)
    if one_batch:
        await writer.write(incoming([*events, *forecasts, (completed_subject(), done)]))
    else:
        await writer.write(incoming(events))
        for i, item in enumerate([*forecasts, (completed_subject(), done)]):
            await writer.write(incoming([item], 100 + i))
    report = await study_disclosure(db, done.study_id, REGISTRY)
    (run,) = report.runs
    assert [h.priced_by for h in run.hours] == ["realised", "realised", "forecast"]
    assert [h.forecast_flags for h in run.hours] == [[], ["stale"], ["short_history"]]
    assert [h.realised_emission_factors for h in run.hours] == ["lifecycle", "lifecycle", None]
    assert [(h.hour, h.flags, h.priced_by) for h in run.flagged_forecast_hours] == [
        (NOW + H, ["stale"], "realised"),
        (NOW + 2 * H, ["short_history"], "forecast"),
    ]
    assert (report.flagged_forecast_hours, report.flagged_forecast_priced_hours) == (2, 1)
    assert run.realised_emission_factors == report.realised_emission_factors == ["lifecycle"]
    # the hour still priced at a flagged forecast is named in the notes, the observed one is not
    note = next(n for n in run.normalisations if "stale or short-history" in n)
    assert (
        note
        == f"1 hour(s) priced at a stale or short-history forecast: {NOW + 2 * H:%Y-%m-%d %H:%M} fra1 (short history)"
    )
    rows = dict(run_rows(run))
    assert rows["Realised intensity's emission factors"] == "lifecycle"
    assert rows["Hours from a stale or short-history forecast"].startswith("2 h, 1 still priced")
    markdown = to_markdown(report)
    assert (
        "Hours whose forecast price came from a stale or short-history forecast: 2 (1 still "
        "priced at it)" in markdown
    )
    assert "Realised intensities on lifecycle emission factors" in markdown
    assert f"| realised (lifecycle) | {FORECAST[1]:.1f} (stale) |" in markdown
    assert f"| forecast | {FORECAST[2]:.1f} (short history) |" in markdown
    assert "short history" in to_csv(report) and "lifecycle" in to_csv(report)


async def test_a_run_priced_from_fresh_forecasts_lists_none(db) -> None:
    events, done, _ = recorded_run()
    fresh = forecast(NOW, list(FORECAST))
    await EventWriter(db).write(incoming([*events, *published(fresh), (completed_subject(), done)]))
    report = await study_disclosure(db, done.study_id, REGISTRY)
    (run,) = report.runs
    assert all(h.forecast_flags == [] for h in run.hours)
    assert run.flagged_forecast_hours == [] and report.flagged_forecast_hours == 0
    assert run.realised_emission_factors == [] and run.hours[0].realised_emission_factors is None
    assert "stale or short-history" not in to_markdown(report)


async def test_the_migrations_backfill_the_flags_and_factors_from_the_log(db) -> None:
    """Rows as the writer stored them before: one row per forecast hour with the first forecast's
    flags, no factors; rolled back and applied again, both come from the logged forecasts."""
    events, done, _ = recorded_run()
    await EventWriter(db).write(
        incoming([*events, *published(FRESH, STALE, SHORT, OBSERVED), (completed_subject(), done)])
    )
    await asyncio.to_thread(roll_back, db, FACTORS)
    await asyncio.to_thread(roll_back, db, FLAGS)
    async with db.connection() as conn:  # the writer's DO NOTHING kept FRESH's flags
        await conn.execute("UPDATE forecast_points SET stale = false")
    assert await db.migrate() == [FLAGS, FACTORS]
    flags = await db.fetch(
        "SELECT hour, issued_at, stale, short_history FROM forecast_points "
        "WHERE stale OR short_history ORDER BY hour, issued_at"
    )
    assert [(hour, issued) for hour, issued, *_ in flags][:2] == [
        (NOW + H, NOW),
        (NOW + 2 * H, NOW),
    ]
    assert len([row for row in flags if row[2]]) == 168  # STALE's hours, 1 to 168 of FRESH's issue
    assert [row[3] for row in flags if row[1] == SHORT.issued_at] == [True] * 168
    factors = await db.fetch("SELECT hour, emission_factors FROM observed_intensity ORDER BY hour")
    assert factors == [(NOW, "lifecycle"), (NOW + H, "lifecycle")]
    report = await study_disclosure(db, done.study_id, REGISTRY)
    assert [h.forecast_flags for h in report.runs[0].hours] == [[], ["stale"], ["short_history"]]

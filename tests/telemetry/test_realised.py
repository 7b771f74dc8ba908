"""Realised emissions: once an hour of a grid region is observed (the observed hours a forecast
carries), every job-hour in it is priced again at the realised intensity, beside the forecast
price the agent charged. The disclosure, the dashboard and the stored rows must keep the two
apart: each figure below is computed by hand from different intensities, so a mix-up fails."""

from __future__ import annotations

import psycopg
import pytest

from metatune import contracts as c
from metatune import subjects
from metatune.units import mass
from metatune_telemetry.api.adapters.dashboard import job_timeline
from metatune_telemetry.app import create_service
from metatune_telemetry.disclosure.adapters.queries import (
    priced_totals,
    site_facts,
    study_disclosure,
)
from metatune_telemetry.disclosure.domain.formats import to_markdown
from metatune_telemetry.ingest.adapters.writer import EventWriter
from tests.support.samples import NOW
from tests.support.waiting import wait_for

from .conftest import count, publish
from .realised_run import (
    FORECAST,
    MARGINAL,
    PUE,
    REALISED,
    REGISTRY,
    WH,
    H,
    completed_subject,
    incoming,
    recorded_run,
)


def kg(wh: float, g: float) -> float:
    return wh / 1000 * PUE * g / 1000


def forecast(issued_at, observed, signal="average", source="electricitymaps") -> c.CarbonForecast:
    return c.CarbonForecast(
        occurred_at=issued_at,
        region="DE",
        issued_at=issued_at,
        start=issued_at,
        model_version="test",
        g_per_kwh=[200.0] * 168,
        p10_g_per_kwh=[190.0] * 168,
        p90_g_per_kwh=[210.0] * 168,
        observed=c.ObservedIntensity(
            source=source,
            signal=signal,
            hours=[c.ObservedHour(hour=NOW + i * H, g_per_kwh=g) for i, g in observed],
        ),
    )


async def test_observed_hours_reprice_job_hours_beside_the_forecast_price(db) -> None:
    events, done, _ = recorded_run()
    writer = EventWriter(db)
    # observations may come before the run's accounting (hour 0) or after it (hour 1); a
    # marginal report of hour 2 and an older issue's report of hour 0 change nothing
    await writer.write(
        incoming([*events, (subjects.forecasts("DE"), forecast(NOW + H, [(0, 260.0)]))])
    )
    await writer.write(incoming([(completed_subject(), done)], 100))
    await writer.write(
        incoming(
            [
                (
                    subjects.forecasts("DE"),
                    forecast(NOW + 2 * H, [(0, REALISED[0]), (1, REALISED[1])]),
                ),
                (
                    subjects.forecasts("DE"),
                    forecast(NOW + 3 * H, [(2, MARGINAL)], "marginal", "watttime"),
                ),
                (subjects.forecasts("DE"), forecast(NOW + H, [(0, 999.0)])),
            ],
            200,
        )
    )
    assert await count(db, "SELECT count(*) FROM observed_intensity") == 3
    report = await study_disclosure(db, done.study_id, REGISTRY)
    (run,) = report.runs
    assert [h.priced_by for h in run.hours] == ["realised", "realised", "forecast"]
    assert [h.g_per_kwh for h in run.hours] == [REALISED[0], REALISED[1], FORECAST[2]]
    assert [h.forecast_g_per_kwh for h in run.hours] == list(FORECAST)
    assert [h.realised_g_per_kwh for h in run.hours] == [*REALISED, None]
    realised_kg = kg(WH[0], REALISED[0]) + kg(WH[1], REALISED[1]) + kg(WH[2], FORECAST[2])
    forecast_kg = sum(kg(wh, g) for wh, g in zip(WH, FORECAST, strict=True))
    assert realised_kg != pytest.approx(forecast_kg)
    assert run.kgco2eq == pytest.approx(realised_kg)
    assert run.forecast_kgco2eq == pytest.approx(forecast_kg)
    assert (run.realised_hours, run.forecast_priced_hours) == (2, 1)
    assert (report.kgco2eq, report.forecast_kgco2eq) == (
        pytest.approx(realised_kg),
        pytest.approx(forecast_kg),
    )
    note = next(n for n in run.normalisations if "priced at the forecast" in n)
    assert f"{NOW + 2 * H:%Y-%m-%d %H:%M} fra1" in note and f"{NOW:%Y-%m-%d %H:%M}" not in note
    markdown = to_markdown(report)
    assert "realised intensity: 2 h; forecast intensity (not observed yet): 1 h" in markdown
    assert f"{mass(forecast_kg * 1000)} CO2eq" in markdown
    assert f"{mass(realised_kg * 1000)} CO2eq" in markdown
    # the dashboard's job view: the disclosed figure and the forecast-priced one beside it
    timeline = await job_timeline(db, done.job_id, REGISTRY)
    assert timeline is not None
    assert timeline.kgco2eq == pytest.approx(realised_kg)
    assert timeline.forecast_kgco2eq == pytest.approx(forecast_kg)
    assert (timeline.realised_hours, timeline.forecast_priced_hours) == (2, 1)
    # the platform totals (/api/totals) the same way
    totals = await priced_totals(db, await site_facts(db, REGISTRY))
    assert totals["kgco2eq"] == pytest.approx(realised_kg)
    assert (totals["realised_hours"], totals["forecast_priced_hours"]) == (2, 1)
    # the stored job-hours keep what the agent charged: re-pricing never rewrites them
    charged = await db.fetch(
        "SELECT g_per_kwh FROM job_energy WHERE job_id = %s ORDER BY hour", (done.job_id,)
    )
    assert [r[0] for r in charged] == list(FORECAST)


async def test_through_the_bus_a_redelivered_observation_is_stored_once(
    tsettings, schema, js
) -> None:
    events, done, _ = recorded_run()
    observed = forecast(NOW + 3 * H, [(0, REALISED[0]), (1, REALISED[1]), (2, 180.0)])
    service = create_service(tsettings, schema=schema)
    async with service.running():
        for subject, event in [*events, (completed_subject(), done)]:
            await publish(js, tsettings, subject, event)
        await publish(js, tsettings, subjects.forecasts("DE"), observed)
        await publish(js, tsettings, subjects.forecasts("DE"), observed, dedup=False)
        db = service.runtime.db

        async def repriced() -> bool:
            try:
                report = await study_disclosure(db, done.study_id, REGISTRY)
            except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
                # the service has not migrated yet (or is migrating)
                return False
            return bool(report.runs) and report.realised_hours == 3

        await wait_for(repriced, "the run re-priced at the observed intensities")
        assert await count(db, "SELECT count(*) FROM observed_intensity") == 3
        report = await study_disclosure(db, done.study_id, REGISTRY)
        expected = sum(kg(wh, g) for wh, g in zip(WH, (*REALISED, 180.0), strict=True))
        assert report.kgco2eq == pytest.approx(expected)
        assert report.forecast_kgco2eq == pytest.approx(
            sum(kg(wh, g) for wh, g in zip(WH, FORECAST, strict=True))
        )
        assert report.forecast_priced_hours == 0

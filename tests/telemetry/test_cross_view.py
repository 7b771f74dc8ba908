"""One recorded study, every view: the dashboard (its API and the study page's chart), the demo's
closing table (through telemetry's read API), the emissions report, `metatune results` and
`study show` (the client over the event log) and the model card all show the same grams, on the
basis of :mod:`metatune.emissions`.

The study is recorded once, as the platform would: its events published on a real NATS (what the
CLI reads) and the same bytes ingested by telemetry's writer into a real PostgreSQL (what the
dashboard and the report read). Its one trial is a CPU run: a few watt-hours metered against a
request that estimated 2 GPU-hours at 0.3 kW, so a view that priced the estimate instead of the
meter (the dashboard once did, 220 times the closing table) is told apart; the forecasts are
skewed (p90 far above the median), so a view that priced the median instead of the forecast's
expected intensity is told apart too; the run's first hour has been observed, its second not,
so "as charged" and "as run" differ. Its deadline passed half an hour before its run ended, and
every view says so in the same words (:mod:`metatune.deadlines`).
"""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import httpx
import nats
import pytest
from huggingface_hub import ModelCard
from starlette.testclient import TestClient

from metatune import contracts as c
from metatune import subjects
from metatune.bus import ensure_streams, headers_for
from metatune.settings import Settings
from metatune_cli.client import AsyncClient
from metatune_cli.demo.summary import closing_table
from metatune_cli.model_card import model_card
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.builders import finished, profiled, requested, submitted
from tests.support.samples import NOW, SPEC, started

from .figures import titled, traces

H = timedelta(hours=1)
WH = (2.5, 1.5)  # a CPU run's metered IT energy in its two hours at osl1, from NOW + 2 h
DE_MEDIAN, NO_MEDIAN = 300.0, 20.0
SKEW = (-10.0, +110.0)  # p10, p90 around the median: the expected intensity is median + 30
OBSERVED_NO = 12.0  # NO observed in the run's first hour
DEADLINE = NOW + timedelta(hours=3, minutes=30)  # the run ends at NOW + 4 h: 30 min late
LATE = "finished after its deadline (1 trial late, by 30 min)"


def expected(median: float) -> float:
    return 0.3 * (median + SKEW[0]) + 0.4 * median + 0.3 * (median + SKEW[1])


def _forecast(region: str, median: float, issued: object = NOW, observed: bool = False):
    return subjects.forecasts(region), c.CarbonForecast(
        occurred_at=issued,
        region=region,
        issued_at=issued,
        start=issued,
        model_version="test",
        g_per_kwh=[median] * 168,
        p10_g_per_kwh=[median + SKEW[0]] * 168,
        p90_g_per_kwh=[median + SKEW[1]] * 168,
        observed=c.ObservedIntensity(
            source="replay", hours=[c.ObservedHour(hour=NOW + 2 * H, g_per_kwh=OBSERVED_NO)]
        )
        if observed
        else None,
    )


def recorded_study(study, job) -> list[tuple[str, c.Event]]:
    spec = SPEC.model_copy(update={"webhook_url": None, "name": "cross-view", "deadline": DEADLINE})
    osl1_price = expected(NO_MEDIAN)
    hours = [
        c.HourlyEnergy(
            hour=NOW + (2 + i) * H,
            datacenter="osl1",
            pue=1.1,
            energy_wh=wh,
            g_per_kwh=osl1_price,
            emissions_g=wh / 1000 * 1.1 * osl1_price,
        )
        for i, wh in enumerate(WH)
    ]
    status = [
        (
            subjects.agent_status(dc),
            c.AgentStatus(
                occurred_at=NOW,
                datacenter=dc,
                region=region,
                gpus_total=1,
                gpus_free=1,
                gpu_model="cpu",
                power_per_gpu_w=300.0,
                pue=pue,
            ),
        )
        for dc, region, pue in (("fra1", "DE", 1.25), ("osl1", "NO", 1.1))
    ]
    return [
        (subjects.DATASETS_SUBMITTED, submitted(study, spec)),
        (
            subjects.DATASETS_PROFILED,
            profiled(study, spec),
        ),
        *status,
        _forecast("DE", DE_MEDIAN),
        _forecast("NO", NO_MEDIAN),
        (
            subjects.JOBS_REQUESTED,
            requested(
                job,
                study,
                spec=spec,
                predicted_metric=0.8,
                predicted_metric_std=0.05,
                metric_name="accuracy",
                gpus=1,
                estimated_gpu_hours=2.0,
                power_kw=0.3,
            ),
        ),
        started(job, "osl1", study, NOW + 2 * H, spec=spec, gpus=1, hours_planned=2),
        finished(
            job,
            study,
            "osl1",
            NOW + 4 * H,
            steps=100,
            metrics=c.RunMetrics(val_loss=0.3, accuracy=0.8),
            majority_baseline=0.5,
            base_model=spec.base_model,
            task=spec.task,
            hardware=c.Hardware(device="cpu", cpu_model="Test CPU"),
            accounting=c.RunAccounting(
                energy_wh=sum(WH),
                emissions_g=sum(h.emissions_g or 0.0 for h in hours),
                wall_seconds=7000.0,
                hours=hours,
            ),
        ),
        _forecast("NO", NO_MEDIAN, issued=NOW + 3 * H, observed=True),
        (
            subjects.STUDIES_STOPPED,
            c.StudyStopped(
                occurred_at=NOW + 4 * H,
                study_id=study,
                reason=c.StopReason.budget,
                trials_requested=1,
                trials_finished=1,
            ),
        ),
    ]


async def test_every_view_shows_the_same_grams(db, private_nats: str) -> None:
    study, job = uuid4(), uuid4()
    events = recorded_study(study, job)
    nc = await nats.connect(private_nats)
    js = nc.jetstream()
    settings = Settings(nats_url=private_nats)
    await ensure_streams(js, settings)
    for subject, event in events:
        await js.publish(subject, event.to_bytes(), headers=headers_for(event))
    await nc.close()
    await EventWriter(db).write(
        [Incoming("METATUNE", i + 1, s, e.to_bytes()) for i, (s, e) in enumerate(events)]
    )
    registry = settings.registry()

    # by hand: charged at the forecast's expected intensity; as run, the first hour at NO's
    # observed intensity; run now at home: the metered Wh at fra1 (PUE 1.25) from NOW, DE's price
    charged = sum(WH) / 1000 * 1.1 * expected(NO_MEDIAN)
    as_run = (WH[0] * OBSERVED_NO + WH[1] * expected(NO_MEDIAN)) / 1000 * 1.1
    run_now = sum(WH) / 1000 * 1.25 * expected(DE_MEDIAN)
    estimated = 0.3 * 2 * 1.25 * expected(DE_MEDIAN)  # what pricing the request's estimate gives
    assert estimated > 100 * run_now and as_run != pytest.approx(charged)

    app = create_app(db, settings)
    with TestClient(app) as web:
        timeline = web.get(f"/api/jobs/{job}/timeline").json()
        report = web.get(f"/api/studies/{study}/report").json()
        page = web.get(f"/studies/{study}").text
        (indexed,) = [s for s in web.get("/api/studies").json() if s["study_id"] == str(study)]
        index = web.get("/").text
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://telemetry"
    ) as api:
        (row,) = await closing_table(api, {study: "cross-view"}, registry, {})
    async with AsyncClient(settings) as client:
        (result,) = await client.results(study)
        detail = await client.study(study)
        (listed,) = [s for s in await client.studies() if s.study_id == study]
    (shown,) = detail.trials
    card = ModelCard(model_card(events[-3][1], spec=SPEC)).data.to_dict()  # type: ignore[arg-type]

    # as charged (each hour at the forecast price the agent charged)
    assert row.emissions_g == pytest.approx(charged)
    assert report["forecast_kgco2eq"] * 1000 == pytest.approx(charged)
    assert timeline["forecast_kgco2eq"] * 1000 == pytest.approx(charged)
    assert result.emissions_g == pytest.approx(charged)
    assert shown.emissions_g == pytest.approx(charged)
    assert card["co2_eq_emissions"]["emissions"] == pytest.approx(charged)
    # as run (realised where observed, the forecast's otherwise)
    assert report["kgco2eq"] * 1000 == pytest.approx(as_run)
    assert result.realised_emissions_g == pytest.approx(as_run)
    assert sum(s["kgco2eq"] for s in timeline["ran"]) * 1000 == pytest.approx(as_run)
    # run now at home: the dashboard, the study page's chart and the closing table
    assert timeline["baseline"]["kgco2eq"] * 1000 == pytest.approx(run_now)
    assert row.run_now_g == pytest.approx(run_now)
    chart = titled(page, "emissions of each trial as run and run now at home")
    bars = {t["name"]: t["customdata"] for t in traces(chart, "bar")}
    assert [v * 1000 for v in bars["run now at home"]] == pytest.approx([run_now])
    assert [v * 1000 for v in bars["as run"]] == pytest.approx([as_run])

    # the deadline, missed: the closing table, the report (and the dashboard's study page that
    # shows it), the dashboard's index, study list and study show
    assert (row.deadline_met, row.trials_late, row.late_by_s) == (False, 1, 1800.0)
    assert row.deadline_cell == "1 late, by 30 min"
    assert (report["deadline_met"], report["trials_late"], report["late_by_s"]) == (
        False,
        1,
        1800.0,
    )
    assert report["deadline_outcome"] == LATE and LATE in page
    assert (indexed["deadline_met"], indexed["trials_late"], indexed["late_by_s"]) == (
        False,
        1,
        1800.0,
    )
    assert indexed["deadline_cell"] == row.deadline_cell and row.deadline_cell in index
    assert detail.deadline_outcome == listed.deadline_outcome == LATE
    assert (listed.deadline_met, listed.trials_late, listed.late_by_s) == (False, 1, 1800.0)
    assert listed.status == "finished (budget) after its deadline (1 trial late, by 30 min)"

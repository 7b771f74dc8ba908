"""``/api/studies/{id}/records`` and ``/api/regions/{region}/forecasts`` against the real database:
what a reader re-pricing the runs gets without telemetry's tables, shaped as documented, behind the
dashboard token like the rest of the API."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from uuid import uuid4

import jsonschema
import pytest
from starlette.testclient import TestClient

from metatune import contracts as c
from metatune import subjects
from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.api.adapters.openapi import document
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from tests.support.samples import NOW

from .scenario import CLASSES, DE, RUN_PUE, RUN_WH, H, guarded_app, record_dashboard


def _valid(path: str, answer: object) -> None:
    """``answer`` is what the OpenAPI document says ``path`` answers with."""
    doc = document()
    schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
    root = {"components": doc["components"]} | schema["schema"]
    jsonschema.Draft202012Validator(root).validate(answer)


async def test_a_studys_records_are_its_requests_outcomes_and_metered_hours(db) -> None:
    s = await record_dashboard(db)
    with TestClient(create_app(db, Settings())) as client:
        records = client.get(f"/api/studies/{s.study}/records").json()
        empty = client.get(f"/api/studies/{uuid4()}/records").json()
        assert client.get("/api/studies/nope/records").status_code == 400
    _valid("/api/studies/{study}/records", records)
    assert records["study_id"] == str(s.study)
    first, second = records["trials"]
    assert (first["job_id"], first["trial_index"], second["job_id"]) == (str(s.job), 0, str(s.job2))
    assert datetime.fromisoformat(first["requested_at"]) == NOW
    assert (first["home_datacenter"], first["region_group"]) == ("fra1", "EU")
    assert (first["metric_name"], first["predicted_metric"], first["predicted_metric_std"]) == (
        "accuracy",
        0.85,
        0.05,
    )
    assert (first["status"], first["early_stopped"], first["majority_baseline"]) == (
        "completed",
        False,
        0.85,
    )
    # chance: 1 / the classes the study's profile counted, on every trial of the study
    assert [t["chance_baseline"] for t in (first, second)] == [1 / CLASSES, 1 / CLASSES]
    assert first["metrics"]["accuracy"] == 0.8 and first["energy_wh"] == sum(RUN_WH)
    # each metered hour as the agent charged it: IT Wh, PUE, the forecast intensity, the grams
    assert [
        (
            datetime.fromisoformat(h["hour"]),
            h["datacenter"],
            h["energy_wh"],
            h["pue"],
            h["g_per_kwh"],
        )
        for h in first["hours"]
    ] == [(NOW + 2 * H, "osl1", 700.0, RUN_PUE, 22.0), (NOW + 3 * H, "osl1", 700.0, RUN_PUE, 23.0)]
    assert [h["emissions_g"] for h in first["hours"]] == pytest.approx(
        [0.7 * RUN_PUE * 22.0, 0.7 * RUN_PUE * 23.0]
    )
    # the trial predicted by loss only has no predicted objective; its early stop is flagged
    assert second["predicted_metric"] is None and second["early_stopped"] is True
    assert second["metrics"] == {
        "val_loss": 0.45,
        "accuracy": None,
        "macro_f1": None,
        "perplexity": None,
    }
    assert second["hours"] == [] and second["energy_wh"] == 10.0
    assert empty["trials"] == []


async def _second_issue(db) -> None:
    """A later issue of DE from NOW + 1 h, 100 g above the first."""
    issue = c.CarbonForecast(
        occurred_at=NOW + H,
        region="DE",
        issued_at=NOW + H,
        start=NOW + H,
        model_version="test-2",
        g_per_kwh=[v + 100 for v in DE],
        p10_g_per_kwh=[v + 90 for v in DE],
        p90_g_per_kwh=[v + 110 for v in DE],
    )
    await EventWriter(db).write(
        [Incoming("METATUNE", 1000, subjects.forecasts("DE"), issue.to_bytes())]
    )


async def test_a_regions_forecast_history_holds_every_issue_cut_to_the_window(db) -> None:
    await record_dashboard(db)
    await _second_issue(db)
    window = {"from": (NOW + H).isoformat(), "to": (NOW + 4 * H).isoformat()}
    with TestClient(create_app(db, Settings())) as client:
        history = client.get("/api/regions/DE/forecasts", params=window).json()
        nowhere = client.get("/api/regions/XX/forecasts", params=window).json()
        # a '+' of the offset that arrives unescaped (a space) is still read as one
        raw = (
            f"/api/regions/DE/forecasts?from={(NOW + H).isoformat()}&to={(NOW + 4 * H).isoformat()}"
        )
        assert client.get(raw).json() == history
    _valid("/api/regions/{region}/forecasts", history)
    assert history["region"] == "DE"
    assert [c["model_version"] for c in history["curves"]] == ["test", "test-2"]  # oldest first
    old, new = history["curves"]
    hours = [NOW + k * H for k in (1, 2, 3)]
    assert [datetime.fromisoformat(h) for h in old["hours"]] == hours
    assert old["g_per_kwh"] == DE[1:4] and old["p10_g_per_kwh"] == [v - 10 for v in DE[1:4]]
    assert [datetime.fromisoformat(h) for h in new["hours"]] == hours
    assert new["g_per_kwh"] == [v + 100 for v in DE[:3]]
    assert nowhere["curves"] == []


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"from": NOW.isoformat()},
        {"from": "2026-03-01T12:00:00", "to": "2026-03-01T14:00:00"},  # no timezone
        {"from": NOW.isoformat(), "to": NOW.isoformat()},
        {"from": NOW.isoformat(), "to": (NOW + 337 * H).isoformat()},
        {"from": "yesterday", "to": NOW.isoformat()},
    ],
    ids=["none", "no-to", "naive", "empty", "too-long", "not-a-time"],
)
async def test_a_forecast_history_needs_a_window_of_at_most_two_weeks(db, params) -> None:
    with TestClient(create_app(db, Settings())) as client:
        refused = client.get("/api/regions/DE/forecasts", params=params)
    assert refused.status_code == 400 and refused.json()["error"]


async def test_both_need_the_dashboard_token_once_one_is_written(db, tmp_path: Path) -> None:
    s = await record_dashboard(db)
    app, token = guarded_app(db, tmp_path)
    window = {"from": NOW.isoformat(), "to": (NOW + H).isoformat()}
    with TestClient(app) as client:
        for path, params in (
            (f"/api/studies/{s.study}/records", {}),
            ("/api/regions/DE/forecasts", window),
        ):
            assert client.get(path, params=params).status_code == 401, path
            bearer = {"Authorization": f"Bearer {token}"}
            assert client.get(path, params=params, headers=bearer).status_code == 200, path

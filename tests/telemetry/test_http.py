"""The HTTP API answers from the real database (Starlette's test client, no socket)."""

from __future__ import annotations

from uuid import uuid4

from starlette.testclient import TestClient

from metatune.settings import Settings
from metatune_telemetry.adapters.http import create_app


async def test_api_report_totals_and_health(db) -> None:
    app = create_app(db, Settings())
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"database": "ok", "mode": "postgresql"}
        report = client.get(f"/api/studies/{uuid4()}/report").json()
        assert report["runs"] == [] and report["kgco2eq"] is None and report["pricing"] == "unpriced"
        assert client.get("/api/totals").json()["runs_completed"] == 0
        assert client.get("/api/studies/nope/report").status_code == 400

"""A tenant's dashboard token shows its own studies only, against the real app and PostgreSQL: the
index and the study list, a study's pages and API, its jobs, its deliveries; another tenant's
study is answered as absent, the platform's totals and /metrics need the admin's token, which
sees everything."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from starlette.testclient import TestClient

from metatune import contracts as c
from metatune import subjects
from metatune.clock import FixedClock
from metatune.dashboard_tokens import TOKEN_FILE, tenant_tokens_dir, write_tokens
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.ingest.adapters.writer import EventWriter, Incoming
from metatune_telemetry.settings import TelemetrySettings
from tests.support.samples import NOW, SPEC

from .scenario import record_dashboard

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def _token(directory: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {(directory / TOKEN_FILE).read_text().strip()}"}


async def test_a_tenant_token_sees_its_own_studies_and_the_admin_all(db, tmp_path: Path) -> None:
    theirs = await record_dashboard(db)  # the default tenant's study, with a job
    ours = uuid4()
    spec = SPEC.model_copy(update={"webhook_url": None, "name": "team-a-study", "tenant": "team-a"})
    submitted = c.DatasetSubmitted(occurred_at=NOW, study_id=ours, spec=spec)
    await EventWriter(db).write(
        [Incoming("METATUNE", 1000, subjects.DATASETS_SUBMITTED, submitted.to_bytes())]
    )
    admin = tmp_path / "tokens"
    write_tokens(admin, T0)
    for tenant in ("team-a", "team-b"):
        write_tokens(tenant_tokens_dir(admin, tenant), T0)
    settings = TelemetrySettings(dashboard_tokens_dir=admin)
    a, b = _token(tenant_tokens_dir(admin, "team-a")), _token(tenant_tokens_dir(admin, "team-b"))
    with TestClient(create_app(db, settings, now=FixedClock(T0).now)) as client:
        listed = {s["study_id"] for s in client.get("/api/studies", headers=a).json()}
        assert listed == {str(ours)}
        assert client.get("/api/studies", headers=b).json() == []
        everyone = {s["study_id"] for s in client.get("/api/studies", headers=_token(admin)).json()}
        assert everyone == {str(ours), str(theirs.study)}
        index = client.get("/", headers=a).text
        assert "team-a-study" in index and "intents-en" not in index
        for path in (
            f"/api/studies/{theirs.study}/report",
            f"/api/studies/{theirs.study}/trials",
            f"/api/studies/{theirs.study}/records",
            f"/studies/{theirs.study}",
            f"/api/jobs/{theirs.job}/timeline",
            f"/jobs/{theirs.job}",
        ):
            assert client.get(path, headers=a).status_code == 404, path  # as if absent
            assert client.get(path, headers=_token(admin)).status_code == 200, path
        assert client.get(f"/api/studies/{ours}/trials", headers=a).status_code == 200
        assert client.get(f"/api/studies/{ours}/trials", headers=b).status_code == 404
        for path in ("/api/totals", "/metrics"):
            assert client.get(path, headers=a).status_code == 403, path
            assert client.get(path, headers=_token(admin)).status_code == 200, path
        assert client.get("/api/webhooks", headers=a).status_code == 200
        # a forecast page is the platform's, not a study's: any valid token reads it
        assert client.get("/datacenters/fra1", headers=b).status_code == 200

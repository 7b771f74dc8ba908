"""The telemetry HTTP API and dashboard (Starlette).

API: ``GET /api/studies/{id}/report`` (``?format=json|csv|md``), ``/api/studies/{id}/trials``,
``/api/studies/{id}/records`` (each trial's request, outcome and metered hours),
``/api/jobs/{id}/timeline``, ``/api/datacenters/{name}/forecast``,
``/api/regions/{region}/forecasts?from=&to=`` (every forecast issue's points for those hours),
``/api/totals``, ``/api/webhooks``, ``/healthz``; ``/metrics`` (Prometheus text format,
:mod:`.metrics`) and ``/openapi.json`` (the API's OpenAPI 3.1 document, :mod:`.openapi`). Pages: ``/``,
``/studies/{id}``, ``/jobs/{id}``, ``/datacenters/{name}``; their charts are drawn by the
plotly.js the ``plotly`` package bundles, served from ``/static/plotly.min.js`` (offline, no CDN).

Everything but ``/healthz`` takes the dashboard's read-only token (:mod:`.auth`): required when
telemetry listens on a non-loopback address (the app refuses to be built without tokens there);
on loopback with no ``dashboard.token`` written, open as before.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from plotly.offline import get_plotlyjs
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, TypeAdapter
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from metatune.clock import RealClock
from metatune.errors import DatabaseUnavailable
from metatune.settings import Settings

from ...adapters.db import Database
from ...disclosure.adapters.queries import priced_totals, site_facts, study_disclosure, study_name
from ...disclosure.domain.formats import to_csv, to_markdown
from ...settings import TelemetrySettings
from ...webhooks.adapters.outbox import list_outbox
from ..domain import pages
from ..domain.records import window
from ..domain.views import StudyListing, Trial
from .auth import TokenAuth, Viewer, require_tokens
from .dashboard import (
    datacenter_forecast,
    job_timeline,
    study_index,
    study_timelines,
    study_trials,
)
from .headers import SecurityHeaders
from .metrics import MetricsEndpoint
from .openapi import OutboxEntry, Totals, render
from .records import region_forecasts, study_records_of
from .tenants import studies_of, study_tenant

TRIALS = TypeAdapter(list[Trial])
STUDIES = TypeAdapter(list[StudyListing])
OUTBOX = TypeAdapter(list[OutboxEntry])


def _no_study() -> Response:
    return JSONResponse({"error": "no such study"}, status_code=404)


def _admin_only() -> Response:
    return JSONResponse(
        {"error": "the whole platform's figures need the admin's token"}, status_code=403
    )


def _uuid(request: Request, name: str) -> UUID | None:
    try:
        return UUID(request.path_params[name])
    except ValueError:
        return None


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(), media_type="application/json")


def create_app(
    db: Database, settings: Settings, *, now: Callable[[], datetime] | None = None
) -> Starlette:
    """The app; ``now`` (default the wall clock) judges when a rotated token's overlap ends.
    Raises ``ConfigurationError`` for a non-loopback ``telemetry_http_host`` without tokens."""
    settings = TelemetrySettings.of(settings)
    gate = require_tokens(settings, now or RealClock().now)
    api = Endpoints(db, settings)
    return Starlette(
        routes=[
            Route("/", api.index),
            Route(pages.PLOTLY_JS, api.plotly),
            Route("/api/studies", api.studies),
            Route("/api/studies/{study}/report", api.report),
            Route("/api/studies/{study}/trials", api.trials),
            Route("/api/studies/{study}/records", api.records),
            Route("/studies/{study}", api.study_page),
            Route("/api/jobs/{job}/timeline", api.timeline),
            Route("/jobs/{job}", api.job_page),
            Route("/api/datacenters/{datacenter}/forecast", api.forecast),
            Route("/datacenters/{datacenter}", api.datacenter_page),
            Route("/api/regions/{region}/forecasts", api.region_history),
            Route("/api/totals", api.totals),
            Route("/api/webhooks", api.webhooks),
            Route("/metrics", api.metrics),
            Route("/openapi.json", api.openapi),
            Route("/healthz", api.healthz),
        ],
        middleware=[Middleware(SecurityHeaders), Middleware(TokenAuth, gate=gate)],
    )


class Endpoints:
    """Every route's handler over one database and the deployment's registry; a tenant's token
    sees its own studies (another's are answered as absent), the admin's sees everything."""

    def __init__(self, db: Database, settings: TelemetrySettings) -> None:
        self.db = db
        self.registry = settings.registry()  # the deployment's datacenters: every page and /metrics
        self.metrics_endpoint = MetricsEndpoint(db, settings.agent_status_interval_s, self.registry)
        self.plotly_js = get_plotlyjs()
        self.openapi_json = render()

    async def plotly(self, request: Request) -> Response:
        return Response(
            self.plotly_js,
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    async def hidden(self, request: Request, study: UUID | None) -> bool:
        """Whether ``study`` is not this request's to see (another tenant's: answered as absent)."""
        viewer: Viewer = request.state.viewer
        if viewer.admin:
            return False
        return study is None or not viewer.sees(await study_tenant(self.db, study))

    async def visible(self, request: Request) -> set[UUID] | None:
        """The studies this request may see; None: every one (the admin)."""
        viewer: Viewer = request.state.viewer
        return None if viewer.tenant is None else await studies_of(self.db, viewer.tenant)

    async def own_study(self, request: Request) -> UUID | Response:
        """The path's study, or the answer when it is not a study id (400) or not this request's
        to see (404, as if absent)."""
        if (study := _uuid(request, "study")) is None:
            return JSONResponse({"error": "not a study id"}, status_code=400)
        return _no_study() if await self.hidden(request, study) else study

    async def listings(self, request: Request) -> list[StudyListing]:
        found, mine = await study_index(self.db), await self.visible(request)
        return found if mine is None else [s for s in found if s.study_id in mine]

    async def report(self, request: Request) -> Response:
        if isinstance(study := await self.own_study(request), Response):
            return study  # not a study id, or not this request's
        disclosure = await study_disclosure(self.db, study, self.registry)
        fmt = request.query_params.get("format", "json")
        if fmt == "csv":
            return PlainTextResponse(to_csv(disclosure), media_type="text/csv")
        if fmt == "md":
            return PlainTextResponse(to_markdown(disclosure), media_type="text/markdown")
        return _json(disclosure)

    async def index(self, request: Request) -> Response:
        return HTMLResponse(pages.index_page(await self.listings(request)))

    async def studies(self, request: Request) -> Response:
        return Response(
            STUDIES.dump_json(await self.listings(request)), media_type="application/json"
        )

    async def trials(self, request: Request) -> Response:
        if isinstance(study := await self.own_study(request), Response):
            return study  # not a study id, or not this request's
        return Response(
            TRIALS.dump_json(await study_trials(self.db, study)), media_type="application/json"
        )

    async def records(self, request: Request) -> Response:
        if isinstance(study := await self.own_study(request), Response):
            return study  # not a study id, or not this request's
        return _json(await study_records_of(self.db, study, self.registry))

    async def study_page(self, request: Request) -> Response:
        if (study := _uuid(request, "study")) is None:
            return HTMLResponse("not a study id", status_code=400)
        if await self.hidden(request, study):
            return HTMLResponse("no such study", status_code=404)
        trials = await study_trials(self.db, study)
        return HTMLResponse(
            pages.study_page(
                await study_disclosure(self.db, study, self.registry),
                trials,
                await study_name(self.db, study),
                await study_timelines(self.db, [t.job_id for t in trials], self.registry),
            )
        )

    async def timeline(self, request: Request) -> Response:
        if (job := _uuid(request, "job")) is None:
            return JSONResponse({"error": "not a job id"}, status_code=400)
        found = await job_timeline(self.db, job, self.registry)
        return (
            JSONResponse({"error": "no such job"}, status_code=404)
            if found is None or await self.hidden(request, found.study_id)
            else _json(found)
        )

    async def job_page(self, request: Request) -> Response:
        if (job := _uuid(request, "job")) is None:
            return HTMLResponse("not a job id", status_code=400)
        found = await job_timeline(self.db, job, self.registry)
        return (
            HTMLResponse("no such job", status_code=404)
            if found is None or await self.hidden(request, found.study_id)
            else HTMLResponse(
                pages.job_page(
                    found, await study_name(self.db, found.study_id) if found.study_id else None
                )
            )
        )

    async def forecast(self, request: Request) -> Response:
        return _json(
            await datacenter_forecast(
                self.db, request.path_params["datacenter"], self.registry, _issues(request)
            )
        )

    async def region_history(self, request: Request) -> Response:
        start, end = _instant(request, "from"), _instant(request, "to")
        if (problem := window(start, end)) is not None or start is None or end is None:
            return JSONResponse({"error": problem}, status_code=400)
        return _json(await region_forecasts(self.db, request.path_params["region"], start, end))

    async def datacenter_page(self, request: Request) -> Response:
        found = await datacenter_forecast(
            self.db, request.path_params["datacenter"], self.registry, _issues(request)
        )
        return HTMLResponse(pages.datacenter_page(found), status_code=200 if found.region else 404)

    async def totals(self, request: Request) -> Response:
        if not request.state.viewer.admin:  # the whole platform's: the admin's alone
            return _admin_only()
        rows = await self.db.fetch_dicts(
            "SELECT (SELECT count(*) FROM run_results WHERE status = 'completed') AS runs_completed, "
            "(SELECT count(*) FROM run_results WHERE status = 'failed') AS runs_failed, "
            "(SELECT coalesce(sum(energy_wh), 0) / 1000 FROM job_energy) AS it_energy_kwh, "
            "(SELECT sum(emissions_g) / 1000 FROM job_energy) AS forecast_priced_kgco2eq, "
            "(SELECT coalesce(sum(energy_wh * pue), 0) / 1000 FROM job_energy WHERE emissions_g IS NULL) "
            "AS unpriced_energy_kwh, "
            "(SELECT (sum(baseline_emissions_g) - sum(expected_emissions_g)) / 1000 FROM "
            "(SELECT DISTINCT ON (plan_version) * FROM plans ORDER BY plan_version DESC, occurred_at DESC LIMIT 1) p) "
            "AS planned_kgco2eq_saved_latest_plan"
        )
        realised = await priced_totals(self.db, await site_facts(self.db, self.registry))
        return _json(
            Totals(
                **rows[0],
                priced_kgco2eq=realised["kgco2eq"],  # realised where observed, else forecast
                realised_hours=realised["realised_hours"],
                forecast_priced_hours=realised["forecast_priced_hours"],
            )
        )

    async def webhooks(self, request: Request) -> Response:
        mine = await self.visible(request)
        rows = [
            {k: (str(v) if v is not None else None) for k, v in r.items()}
            for r in await list_outbox(self.db, request.query_params.get("state"))
            if mine is None or r["study_id"] in mine
        ]
        return Response(
            OUTBOX.dump_json(OUTBOX.validate_python(rows)), media_type="application/json"
        )

    async def metrics(self, request: Request) -> Response:
        if not request.state.viewer.admin:
            return _admin_only()
        try:
            body = await self.metrics_endpoint.render()
        except DatabaseUnavailable:
            return PlainTextResponse("database unavailable", status_code=503)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def openapi(self, request: Request) -> Response:
        return Response(self.openapi_json, media_type="application/json")

    async def healthz(self, request: Request) -> Response:
        try:
            await self.db.fetch("SELECT 1")
        except DatabaseUnavailable:
            return JSONResponse({"database": "unavailable"}, status_code=503)
        return JSONResponse({"database": "ok", "mode": self.db.mode})


def _issues(request: Request) -> int:
    """``?issues=N``: how many forecast issues to draw (1 to 24, default 3)."""
    try:
        return min(24, max(1, int(request.query_params.get("issues", "3"))))
    except ValueError:
        return 3


def _instant(request: Request, name: str) -> datetime | None:
    """``?from=`` / ``?to=``: an ISO 8601 instant (None: absent or not one; a ``+`` of its offset
    that reached us unescaped, as a space, is read as the ``+`` it was)."""
    try:
        return datetime.fromisoformat(request.query_params[name].replace(" ", "+"))
    except (KeyError, ValueError):
        return None

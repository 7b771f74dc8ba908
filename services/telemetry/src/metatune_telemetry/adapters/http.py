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

from ..domain import pages
from ..domain.formats import to_csv, to_markdown
from ..domain.records import window
from ..domain.views import StudyListing, Trial
from ..settings import TelemetrySettings
from .auth import TokenAuth, Viewer, require_tokens
from .dashboard import (
    datacenter_forecast,
    job_timeline,
    study_index,
    study_timelines,
    study_trials,
)
from .db import Database
from .headers import SecurityHeaders
from .metrics import MetricsEndpoint
from .openapi import OutboxEntry, Totals, render
from .outbox import list_outbox
from .queries import priced_totals, site_facts, study_disclosure, study_name
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
    plotly_js = get_plotlyjs()
    registry = settings.registry()  # the deployment's datacenters: every page and /metrics
    metrics_endpoint = MetricsEndpoint(db, settings.agent_status_interval_s, registry)
    openapi_json = render()

    async def plotly(request: Request) -> Response:
        return Response(
            plotly_js,
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    async def hidden(request: Request, study: UUID | None) -> bool:
        """Whether ``study`` is not this request's to see (another tenant's: answered as absent)."""
        viewer: Viewer = request.state.viewer
        if viewer.admin:
            return False
        return study is None or not viewer.sees(await study_tenant(db, study))

    async def visible(request: Request) -> set[UUID] | None:
        """The studies this request may see; None: every one (the admin)."""
        viewer: Viewer = request.state.viewer
        return None if viewer.tenant is None else await studies_of(db, viewer.tenant)

    async def own_study(request: Request) -> UUID | Response:
        """The path's study, or the answer when it is not a study id (400) or not this request's
        to see (404, as if absent)."""
        if (study := _uuid(request, "study")) is None:
            return JSONResponse({"error": "not a study id"}, status_code=400)
        return _no_study() if await hidden(request, study) else study

    async def listings(request: Request) -> list[StudyListing]:
        found, mine = await study_index(db), await visible(request)
        return found if mine is None else [s for s in found if s.study_id in mine]

    async def report(request: Request) -> Response:
        if isinstance(study := await own_study(request), Response):
            return study  # not a study id, or not this request's
        disclosure = await study_disclosure(db, study, registry)
        fmt = request.query_params.get("format", "json")
        if fmt == "csv":
            return PlainTextResponse(to_csv(disclosure), media_type="text/csv")
        if fmt == "md":
            return PlainTextResponse(to_markdown(disclosure), media_type="text/markdown")
        return _json(disclosure)

    async def index(request: Request) -> Response:
        return HTMLResponse(pages.index_page(await listings(request)))

    async def studies(request: Request) -> Response:
        return Response(STUDIES.dump_json(await listings(request)), media_type="application/json")

    async def trials(request: Request) -> Response:
        if isinstance(study := await own_study(request), Response):
            return study  # not a study id, or not this request's
        return Response(
            TRIALS.dump_json(await study_trials(db, study)), media_type="application/json"
        )

    async def records(request: Request) -> Response:
        if isinstance(study := await own_study(request), Response):
            return study  # not a study id, or not this request's
        return _json(await study_records_of(db, study, registry))

    async def study_page(request: Request) -> Response:
        if (study := _uuid(request, "study")) is None:
            return HTMLResponse("not a study id", status_code=400)
        if await hidden(request, study):
            return HTMLResponse("no such study", status_code=404)
        trials = await study_trials(db, study)
        return HTMLResponse(
            pages.study_page(
                await study_disclosure(db, study, registry),
                trials,
                await study_name(db, study),
                await study_timelines(db, [t.job_id for t in trials], registry),
            )
        )

    async def timeline(request: Request) -> Response:
        if (job := _uuid(request, "job")) is None:
            return JSONResponse({"error": "not a job id"}, status_code=400)
        found = await job_timeline(db, job, registry)
        return (
            JSONResponse({"error": "no such job"}, status_code=404)
            if found is None or await hidden(request, found.study_id)
            else _json(found)
        )

    async def job_page(request: Request) -> Response:
        if (job := _uuid(request, "job")) is None:
            return HTMLResponse("not a job id", status_code=400)
        found = await job_timeline(db, job, registry)
        return (
            HTMLResponse("no such job", status_code=404)
            if found is None or await hidden(request, found.study_id)
            else HTMLResponse(
                pages.job_page(
                    found, await study_name(db, found.study_id) if found.study_id else None
                )
            )
        )

    async def forecast(request: Request) -> Response:
        return _json(
            await datacenter_forecast(
                db, request.path_params["datacenter"], registry, _issues(request)
            )
        )

    async def region_history(request: Request) -> Response:
        start, end = _instant(request, "from"), _instant(request, "to")
        if (problem := window(start, end)) is not None or start is None or end is None:
            return JSONResponse({"error": problem}, status_code=400)
        return _json(await region_forecasts(db, request.path_params["region"], start, end))

    async def datacenter_page(request: Request) -> Response:
        found = await datacenter_forecast(
            db, request.path_params["datacenter"], registry, _issues(request)
        )
        return HTMLResponse(pages.datacenter_page(found), status_code=200 if found.region else 404)

    async def totals(request: Request) -> Response:
        if not request.state.viewer.admin:  # the whole platform's: the admin's alone
            return _admin_only()
        rows = await db.fetch_dicts(
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
        realised = await priced_totals(db, await site_facts(db, registry))
        return _json(
            Totals(
                **rows[0],
                priced_kgco2eq=realised["kgco2eq"],  # realised where observed, else forecast
                realised_hours=realised["realised_hours"],
                forecast_priced_hours=realised["forecast_priced_hours"],
            )
        )

    async def webhooks(request: Request) -> Response:
        mine = await visible(request)
        rows = [
            {k: (str(v) if v is not None else None) for k, v in r.items()}
            for r in await list_outbox(db, request.query_params.get("state"))
            if mine is None or r["study_id"] in mine
        ]
        return Response(
            OUTBOX.dump_json(OUTBOX.validate_python(rows)), media_type="application/json"
        )

    async def metrics(request: Request) -> Response:
        if not request.state.viewer.admin:
            return _admin_only()
        try:
            body = await metrics_endpoint.render()
        except DatabaseUnavailable:
            return PlainTextResponse("database unavailable", status_code=503)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def openapi(request: Request) -> Response:
        return Response(openapi_json, media_type="application/json")

    async def healthz(request: Request) -> Response:
        try:
            await db.fetch("SELECT 1")
        except DatabaseUnavailable:
            return JSONResponse({"database": "unavailable"}, status_code=503)
        return JSONResponse({"database": "ok", "mode": db.mode})

    return Starlette(
        routes=[
            Route("/", index),
            Route(pages.PLOTLY_JS, plotly),
            Route("/api/studies", studies),
            Route("/api/studies/{study}/report", report),
            Route("/api/studies/{study}/trials", trials),
            Route("/api/studies/{study}/records", records),
            Route("/studies/{study}", study_page),
            Route("/api/jobs/{job}/timeline", timeline),
            Route("/jobs/{job}", job_page),
            Route("/api/datacenters/{datacenter}/forecast", forecast),
            Route("/datacenters/{datacenter}", datacenter_page),
            Route("/api/regions/{region}/forecasts", region_history),
            Route("/api/totals", totals),
            Route("/api/webhooks", webhooks),
            Route("/metrics", metrics),
            Route("/openapi.json", openapi),
            Route("/healthz", healthz),
        ],
        middleware=[Middleware(SecurityHeaders), Middleware(TokenAuth, gate=gate)],
    )


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

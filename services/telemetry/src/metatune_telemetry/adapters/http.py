"""The telemetry HTTP API (Starlette): the disclosure per study, platform totals, outbox state.

``GET /api/studies/{id}/report`` (``?format=json|csv|md``), ``GET /api/totals``,
``GET /api/webhooks``, ``GET /healthz``; ``GET /studies/{id}`` renders the disclosure as HTML.
"""

from __future__ import annotations

import html
from uuid import UUID

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from metatune.errors import DatabaseUnavailable
from metatune.settings import Settings

from ..domain.charts import bar_chart
from ..domain.formats import run_rows, to_csv, to_markdown
from .db import Database
from .outbox import list_outbox
from .queries import study_disclosure


def create_app(db: Database, settings: Settings) -> Starlette:
    async def report(request: Request) -> Response:
        try:
            study = UUID(request.path_params["study"])
        except ValueError:
            return JSONResponse({"error": "not a study id"}, status_code=400)
        disclosure = await study_disclosure(db, study)
        fmt = request.query_params.get("format", "json")
        if fmt == "csv":
            return PlainTextResponse(to_csv(disclosure), media_type="text/csv")
        if fmt == "md":
            return PlainTextResponse(to_markdown(disclosure), media_type="text/markdown")
        return Response(disclosure.model_dump_json(), media_type="application/json")

    async def study_page(request: Request) -> Response:
        try:
            study = UUID(request.path_params["study"])
        except ValueError:
            return HTMLResponse("not a study id", status_code=400)
        d = await study_disclosure(db, study)
        parts = [f"<h1>Study {study}</h1><p>{d.it_energy_kwh:.4f} kWh IT, "
                 f"{'unpriced' if d.kgco2eq is None else f'{d.kgco2eq:.6f}'} kgCO2eq ({d.pricing})</p>"]
        bars = [(f"trial {r.trial_index} {h.hour:%m-%d %H:%M} {h.datacenter}", h.facility_energy_kwh, h.datacenter)
                for r in d.runs for h in r.hours]
        parts.append(bar_chart("Facility energy per run-hour", bars, "kWh"))
        parts.append(bar_chart("Emissions per run-hour (priced hours)",
                               [(f"trial {r.trial_index} {h.hour:%m-%d %H:%M}", h.kgco2eq, h.datacenter)
                                for r in d.runs for h in r.hours if h.kgco2eq is not None], "kgCO2eq"))
        for run in d.runs:
            rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in run_rows(run))
            parts.append(f"<h2>Trial {run.trial_index} ({run.status})</h2><table>{rows}</table>")
        return HTMLResponse(f"<!doctype html><title>MetaTune study</title>{''.join(parts)}")

    async def totals(request: Request) -> Response:
        rows = await db.fetch_dicts(
            "SELECT (SELECT count(*) FROM run_results WHERE status = 'completed') AS runs_completed, "
            "(SELECT count(*) FROM run_results WHERE status = 'failed') AS runs_failed, "
            "(SELECT coalesce(sum(energy_wh), 0) / 1000 FROM job_energy) AS it_energy_kwh, "
            "(SELECT sum(emissions_g) / 1000 FROM job_energy) AS priced_kgco2eq, "
            "(SELECT coalesce(sum(energy_wh * pue), 0) / 1000 FROM job_energy WHERE emissions_g IS NULL) "
            "AS unpriced_energy_kwh, "
            "(SELECT (sum(baseline_emissions_g) - sum(expected_emissions_g)) / 1000 FROM "
            "(SELECT DISTINCT ON (plan_version) * FROM plans ORDER BY plan_version DESC, occurred_at DESC LIMIT 1) p) "
            "AS planned_kgco2eq_saved_latest_plan")
        return JSONResponse(rows[0])

    async def webhooks(request: Request) -> Response:
        return JSONResponse([{k: (str(v) if v is not None else None) for k, v in r.items()}
                             for r in await list_outbox(db, request.query_params.get("state"))])

    async def healthz(request: Request) -> Response:
        try:
            await db.fetch("SELECT 1")
        except DatabaseUnavailable:
            return JSONResponse({"database": "unavailable"}, status_code=503)
        return JSONResponse({"database": "ok", "mode": db.mode})

    return Starlette(routes=[
        Route("/api/studies/{study}/report", report), Route("/studies/{study}", study_page),
        Route("/api/totals", totals), Route("/api/webhooks", webhooks), Route("/healthz", healthz),
    ])

"""The OpenAPI 3.1 document of telemetry's read API, built from the pydantic models the API
answers with (their JSON Schemas are the document's components), served at ``/openapi.json``
and committed as ``docs/telemetry.openapi.json`` (a test keeps the two equal). After changing a
model or an endpoint::

    .venv/bin/python -m metatune_telemetry.api.adapters.openapi > docs/telemetry.openapi.json
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ...disclosure.domain.disclosure import StudyDisclosure
from ..domain.records import MAX_WINDOW, ForecastHistory, StudyRecords
from ..domain.views import DatacenterForecast, JobTimeline, StudyListing, Trial

REF = "#/components/schemas/{model}"
API_VERSION = "1.0.0"  # of the read API, not of the package


class Totals(BaseModel):
    """Platform-wide totals (``/api/totals``)."""

    runs_completed: int
    runs_failed: int
    it_energy_kwh: float
    forecast_priced_kgco2eq: float | None
    unpriced_energy_kwh: float
    planned_kgco2eq_saved_latest_plan: float | None
    priced_kgco2eq: float | None  # realised where observed, else forecast
    realised_hours: int
    forecast_priced_hours: int


class OutboxEntry(BaseModel):
    """A webhook notification of the outbox (``/api/webhooks``), every value as text, the URL
    with its credentials redacted."""

    id: str
    message_id: str
    study_id: str | None
    event_type: str
    url: str
    state: str
    attempts: str
    next_attempt_at: str
    last_status: str | None
    last_error: str | None
    created_at: str
    delivered_at: str | None


class Health(BaseModel):
    database: str  # ok | unavailable
    mode: str | None = None  # timescaledb | postgresql


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str
    summary: str
    model: type[BaseModel] | None  # None: text
    many: bool = False
    params: tuple[dict[str, Any], ...] = ()
    media_type: str = "application/json"
    errors: tuple[int, ...] = ()
    open: bool = False  # needs no token


def _path(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description} | {
        "schema": schema
    }


def _instant(name: str, description: str) -> dict[str, Any]:
    return _query(name, description, {"type": "string", "format": "date-time"}) | {"required": True}


STUDY = _path("study", "the study id (a UUID)")
ENDPOINTS = (
    Endpoint("/api/studies", "The latest studies, newest first", StudyListing, many=True),
    Endpoint(
        "/api/studies/{study}/report",
        "A study's emissions disclosure (json; csv and md as text)",
        StudyDisclosure,
        params=(
            STUDY,
            _query(
                "format",
                "json (default), csv or md",
                {"type": "string", "enum": ["json", "csv", "md"], "default": "json"},
            ),
        ),
        errors=(400,),
    ),
    Endpoint(
        "/api/studies/{study}/trials",
        "A study's trials: predicted against actual objective",
        Trial,
        many=True,
        params=(STUDY,),
        errors=(400,),
    ),
    Endpoint(
        "/api/studies/{study}/records",
        "A study's trials as recorded: request, outcome, metered energy and emissions per hour",
        StudyRecords,
        params=(STUDY,),
        errors=(400,),
    ),
    Endpoint(
        "/api/jobs/{job}/timeline",
        "Where and when a job ran, was planned, and would have run now",
        JobTimeline,
        params=(_path("job", "the job id (a UUID)"),),
        errors=(400, 404),
    ),
    Endpoint(
        "/api/datacenters/{datacenter}/forecast",
        "The latest carbon-intensity forecasts of a datacenter's grid region",
        DatacenterForecast,
        params=(
            _path("datacenter", "the datacenter's name"),
            _query(
                "issues",
                "how many forecast issues (1 to 24)",
                {"type": "integer", "minimum": 1, "maximum": 24, "default": 3},
            ),
        ),
    ),
    Endpoint(
        "/api/regions/{region}/forecasts",
        "Every carbon-intensity forecast issue of a grid region for a window of hours",
        ForecastHistory,
        params=(
            _path("region", "the grid region (as the registry names it, e.g. DE)"),
            _instant("from", "the first hour wanted (ISO 8601 with a timezone)"),
            _instant(
                "to",
                f"the hour after the last one wanted (at most {MAX_WINDOW.days * 24} h after from)",
            ),
        ),
        errors=(400,),
    ),
    Endpoint("/api/totals", "Platform-wide totals", Totals),
    Endpoint(
        "/api/webhooks",
        "The latest 50 webhook notifications of the outbox",
        OutboxEntry,
        many=True,
        params=(
            _query(
                "state",
                "only notifications in this state",
                {"type": "string", "enum": ["pending", "sending", "delivered", "dead"]},
            ),
        ),
    ),
    Endpoint(
        "/metrics",
        "The platform's state in the Prometheus text format",
        None,
        media_type="text/plain; version=0.0.4",
    ),
    Endpoint("/healthz", "Whether the database answers", Health, errors=(503,), open=True),
)
ERRORS = {
    400: "not a valid id or window",
    404: "nothing recorded of it",
    503: "the database is unavailable",
}
SECURITY = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "the dashboard.token"},
    "cookie": {
        "type": "apiKey",
        "in": "cookie",
        "name": "metatune_dashboard",
        "description": "set by opening any page once with ?token=<token>",
    },
}


def _operation(e: Endpoint, schemas: dict[type[BaseModel], dict[str, Any]]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if e.model is not None:
        schema = schemas[e.model]
        if e.many:
            schema = {"type": "array", "items": schema}
    responses: dict[str, Any] = {
        "200": {"description": "OK", "content": {e.media_type: {"schema": schema}}}
    }
    for status in e.errors:
        responses[str(status)] = {"description": ERRORS[status]}
    if not e.open:
        responses["401"] = {"description": "no valid dashboard token"}
    operation: dict[str, Any] = {
        "summary": e.summary,
        "operationId": e.path.strip("/").replace("/", "_").replace("{", "").replace("}", ""),
        "responses": responses,
    }
    if e.params:
        operation["parameters"] = list(e.params)
    if e.open:
        operation["security"] = []
    return {"get": operation}


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the read API."""
    models = sorted({e.model for e in ENDPOINTS if e.model is not None}, key=lambda m: m.__name__)
    refs, defs = models_json_schema([(m, "serialization") for m in models], ref_template=REF)
    schemas = {m: refs[(m, "serialization")] for m in models}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "MetaTune telemetry read API",
            "version": API_VERSION,
            "description": "Read-only: studies, trials and their records, job timelines, "
            "forecasts and their history, totals, the webhook outbox, metrics. Every path but "
            "/healthz needs the dashboard token.",
        },
        "paths": {e.path: _operation(e, schemas) for e in ENDPOINTS},
        "components": {"schemas": defs.get("$defs", {}), "securitySchemes": SECURITY},
        "security": [{"bearer": []}, {"cookie": []}],
    }


def render() -> str:
    """The document as committed: sorted keys, two-space indent, a final newline."""
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")

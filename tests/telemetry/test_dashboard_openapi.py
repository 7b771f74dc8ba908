"""The read API's OpenAPI 3.1 document: the committed docs/telemetry.openapi.json is the one the
code generates and serves, it lists every API route of the app, and the schemas it gives are
the shapes the real app answers with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from starlette.routing import Route
from starlette.testclient import TestClient

from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.api.adapters.openapi import document, render

from .recording import outbox
from .scenario import record_dashboard

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "telemetry.openapi.json"
REGENERATE = (
    ".venv/bin/python -m metatune_telemetry.api.adapters.openapi > docs/telemetry.openapi.json"
)


def test_the_committed_document_is_the_generated_one() -> None:
    assert COMMITTED.read_text() == render(), f"out of date: run `{REGENERATE}`"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for v in node.values() for r in _refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_every_api_route_is_documented_and_every_reference_resolves(db) -> None:
    doc = document()
    assert doc["openapi"].startswith("3.1")
    app = create_app(db, Settings())
    served = {r.path for r in app.routes if isinstance(r, Route)}
    api = {p for p in served if p.startswith("/api/")} | {"/metrics", "/healthz"}
    assert set(doc["paths"]) == api
    schemas = doc["components"]["schemas"]
    assert all(ref.removeprefix("#/components/schemas/") in schemas for ref in _refs(doc))
    with TestClient(app) as client:
        assert client.get("/openapi.json").json() == json.loads(COMMITTED.read_text())


async def test_the_real_answers_match_their_documented_schemas(db) -> None:
    s = await record_dashboard(db)
    await outbox(db, "dead", 3, age_s=60)
    doc = document()
    # the document's components, resolvable by JSON Schema for each answer's schema
    resolver_root = {"components": doc["components"]}

    def check(path: str, url: str) -> None:
        schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        answer = client.get(url)
        assert answer.status_code == 200, url
        jsonschema.Draft202012Validator(resolver_root | schema["schema"]).validate(answer.json())

    with TestClient(create_app(db, Settings())) as client:
        check("/api/studies", "/api/studies")
        check("/api/studies/{study}/report", f"/api/studies/{s.study}/report")
        check("/api/studies/{study}/trials", f"/api/studies/{s.study}/trials")
        check("/api/jobs/{job}/timeline", f"/api/jobs/{s.job}/timeline")
        check("/api/datacenters/{datacenter}/forecast", "/api/datacenters/fra1/forecast")
        check("/api/totals", "/api/totals")
        check("/api/webhooks", "/api/webhooks")
        assert len(client.get("/api/webhooks").json()) == 1
        check("/healthz", "/healthz")

"""A loopback stand-in of the EIA Open Data API v2 (``electricity/rto/fuel-type-data``): a real HTTP
server on 127.0.0.1 that answers from provider-format rows (``fixtures/providers/eia930_ERCO.json``)
as EIA documents them: the key in the ``api_key`` query parameter (403 ``API_KEY_INVALID``
otherwise), ``facets[respondent][]``, ``start`` / ``end`` on the hour-ending ``period`` (both
included), ``offset`` / ``length`` pages, ``total`` as a string, and the request echoed back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.servers import QuietHandler, base_url, serve_http

PATH = "/v2/electricity/rto/fuel-type-data/data/"


class EiaApi:
    """Serves ``rows`` to requests that carry ``key``; ``failures`` (statuses) are answered first;
    ``requests`` keeps every request's query (as parsed on the server)."""

    def __init__(self, rows: list[dict[str, Any]], key: str) -> None:
        self.rows, self.key = rows, key
        self.failures: list[int] = []
        self.requests: list[dict[str, list[str]]] = []
        api = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                api.requests.append(query)
                status, body = api.answer(parts.path, query)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = serve_http(Handler)
        self.url = base_url(self.server)

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        if query.get("api_key") != [self.key]:
            code = "API_KEY_MISSING" if "api_key" not in query else "API_KEY_INVALID"
            return 403, {"error": {"code": code, "message": "An invalid api_key was supplied."}}
        if self.failures:
            return self.failures.pop(0), {"error": "scripted failure"}
        if path != PATH:
            return 404, {"error": f"Invalid route {path}", "code": 404}
        if query.get("frequency") != ["hourly"] or query.get("data[0]") != ["value"]:
            return 400, {"error": f"bad query, echoed: {query}", "code": 400}
        respondents = set(query.get("facets[respondent][]", []))
        start, end = query["start"][0], query["end"][0]
        rows = [
            r for r in self.rows if r["respondent"] in respondents and start <= r["period"] <= end
        ]
        rows.sort(key=lambda r: (r["period"], r["fueltype"]))
        offset, length = int(query["offset"][0]), int(query["length"][0])
        request = {k: v if len(v) > 1 else v[0] for k, v in query.items()}
        return 200, {
            "response": {
                "total": str(len(rows)),
                "dateFormat": 'YYYY-MM-DD"T"HH24',
                "frequency": "hourly",
                "data": rows[offset : offset + length],
                "description": "Hourly net generation by balancing authority and energy source.",
            },
            "request": {"command": PATH, "params": request},
            "apiVersion": "2.1.8",
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(rows: list[dict[str, Any]], key: str) -> Iterator[EiaApi]:
    api = EiaApi(rows, key)
    try:
        yield api
    finally:
        api.close()

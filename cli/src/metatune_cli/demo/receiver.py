"""The demo's webhook receiver: a loopback HTTP server that checks each delivery's Standard
Webhooks signature, as a user's endpoint would, and keeps what it received.

Each delivery is appended to ``deliveries.jsonl`` (headers and body as received), so anyone can
verify them again later with the signing secret.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


@dataclass
class Delivery:
    webhook_id: str
    type: str
    verified: bool
    subject: str | None
    correlation: str | None


@dataclass
class WebhookReceiver:
    """Start with :meth:`start`; ``url`` is where the studies' webhooks point."""

    secret: str
    log_path: Path
    deliveries: list[Delivery] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None, "the receiver is not started"
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else host
        return f"http://{name}:{port}/hooks/metatune"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                receiver.receive({k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return  # the demo's screen shows deliveries; no access log on stderr

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._server.serve_forever, name="webhook-receiver", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def receive(self, headers: dict[str, str], body: bytes) -> None:
        verified = self.verify(headers, body)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
        data = payload.get("data") or {}
        event = data.get("event") or {}
        delivery = Delivery(
            webhook_id=headers.get("webhook-id", ""),
            type=str(payload.get("type", "?")),
            verified=verified,
            subject=data.get("subject"),
            correlation=event.get("job_id") or event.get("study_id"),
        )
        record = {
            "headers": {k: headers.get(k, "") for k in HEADERS},
            "body": body.decode("utf-8", "replace"),
            "verified": verified,
        }
        with self._lock:
            self.deliveries.append(delivery)
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

    def verify(self, headers: dict[str, str], body: bytes) -> bool:
        """With the reference library (``standardwebhooks``) where it is installed; a delivery that
        is not verified is kept and counted as such, never trusted."""
        try:
            from standardwebhooks import Webhook
        except ImportError:
            return False
        try:
            Webhook(self.secret).verify(body, {k: headers.get(k, "") for k in HEADERS})
        except Exception:
            return False
        return True

    def counts(self) -> tuple[int, int]:
        """(deliveries, verified)."""
        with self._lock:
            return len(self.deliveries), sum(d.verified for d in self.deliveries)

"""Receive a study's webhooks: a loopback HTTP endpoint that checks each delivery's Standard Webhooks
signature and prints one line per notification; ``study.completed`` prints its data (the best
trial, its adapter, energy and emissions) and, with --exit-on, ends the receiver.

    SECRET=$(.venv/bin/metatune webhooks secret)
    .venv/bin/python examples/webhook_receiver.py --secret "$SECRET" --exit-on study.completed
    .venv/bin/metatune submit examples/study.yaml --webhook http://127.0.0.1:8765/hooks

Telemetry sends to loopback only where allowed: start the platform with
METATUNE_WEBHOOK_ALLOWED_NETWORKS='["127.0.0.1/32"]'. A delivery whose signature does not verify is
answered 401 (telemetry retries it) and printed as such.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secret", required=True, help="whsec_...: `metatune webhooks secret`")
    parser.add_argument("--port", type=int, default=8765, help="on 127.0.0.1 (0: any free port)")
    parser.add_argument("--exit-on", metavar="TYPE", help="end after a delivery of this type")
    args = parser.parse_args()
    verifier = Webhook(args.secret)
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                payload = verifier.verify(body, headers)
            except WebhookVerificationError:
                print(f"unverified delivery {headers.get('webhook-id')}: refused", flush=True)
                self.send_response(401)
                self.end_headers()
                return
            self.send_response(204)
            self.end_headers()
            kind, data = payload.get("type"), payload.get("data") or {}
            event = data.get("event") or data  # study.completed: the study's summary itself
            what = event.get("job_id") or event.get("study_id") or ""
            print(f"{kind} {what} (signature verified)", flush=True)
            if kind == "study.completed":
                print(json.dumps(data, indent=2), flush=True)
            if kind == args.exit_on:
                done.set()

        def log_message(self, format: str, *log_args: Any) -> None:
            return  # one line per notification is printed above; no access log

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]
    print(f"receiving on http://127.0.0.1:{port}/hooks", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

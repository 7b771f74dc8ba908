"""A local webhook receiver that records what it is sent and answers as scripted, the signing
secret the tests' telemetry uses, and the events of a study with a webhook."""

from __future__ import annotations

import http.server
import json
import threading
from datetime import timedelta
from uuid import uuid4

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.domain.signing import new_secret
from tests.support.samples import CONFIG, NOW, SPEC

SECRET = new_secret()


class Receiver:
    """A local HTTP receiver; ``script[path]`` lists the (status, headers) of successive answers
    (the last repeats); ``hang`` paths never answer until the test ends."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.script: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.hang: set[str] = set()
        self.release = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.received.append((self.path, dict(self.headers), body))
                if self.path in receiver.hang:
                    receiver.release.wait(30)
                answers = receiver.script.get(self.path, [(204, {})])
                status, headers = answers.pop(0) if len(answers) > 1 else answers[0]
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def bodies(self, path: str) -> list[dict]:
        return [json.loads(b) for p, _, b in self.received if p == path]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


def study_events(hook: str | None):
    study, job = uuid4(), uuid4()
    spec = SPEC.model_validate(
        {**SPEC.model_dump(), "webhook_url": hook}
    )  # validated: the URL is an HttpUrl
    return (
        study,
        job,
        [
            (
                subjects.DATASETS_SUBMITTED,
                c.DatasetSubmitted(occurred_at=NOW, study_id=study, spec=spec),
            ),
            (
                subjects.JOBS_REQUESTED,
                c.JobRequested(
                    occurred_at=NOW,
                    job_id=job,
                    study_id=study,
                    trial_index=0,
                    spec=spec,
                    config=CONFIG,
                    estimated_gpu_hours=1.0,
                    power_kw=0.5,
                    deadline=spec.deadline,
                ),
            ),
        ],
    )


def infeasible(job, study, hours: int):
    return (
        subjects.JOBS_INFEASIBLE,
        c.JobInfeasible(
            occurred_at=NOW + timedelta(hours=hours), job_id=job, study_id=study, reason="deadline"
        ),
    )

"""A local webhook receiver that records what it is sent and answers as scripted, the signing
secret the tests' telemetry uses, and the events of a study with a webhook."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from uuid import uuid4

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.webhooks.domain.signing import new_secret
from tests.support.builders import requested, submitted
from tests.support.samples import NOW, SPEC
from tests.support.servers import QuietHandler, base_url, serve_http

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

        class Handler(QuietHandler):
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

        self.server = serve_http(Handler)
        self.base = base_url(self.server)

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
            (subjects.DATASETS_SUBMITTED, submitted(study, spec)),
            (subjects.JOBS_REQUESTED, requested(job, study, spec=spec)),
        ],
    )


def infeasible(job, study, hours: int):
    return (
        subjects.JOBS_INFEASIBLE,
        c.JobInfeasible(
            occurred_at=NOW + timedelta(hours=hours), job_id=job, study_id=study, reason="deadline"
        ),
    )

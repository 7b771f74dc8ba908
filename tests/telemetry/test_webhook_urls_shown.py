"""A webhook URL is shown without its query and user info everywhere (a token may sit in a query
parameter of any name): the ``webhook_dead`` event, telemetry's log and the delivery error,
``/api/webhooks`` and ``metatune webhooks list``. Real NATS, real PostgreSQL, the real service and
CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys

import nats
import pytest
from starlette.testclient import TestClient

from metatune import subjects
from metatune.contracts import ErrorEvent
from metatune.redaction import url_without_credentials
from metatune.settings import Settings
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.app import create_service
from metatune_telemetry.settings import TelemetrySettings
from metatune_telemetry.webhooks.adapters.outbox import list_outbox
from tests.support.waiting import received_on, wait_for

from .conftest import publish
from .receiver import SECRET, Receiver, study_events

PASSWORD, TOKEN = "hook-pw-Jq81", "code-Vt93-only-the-receiver"


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_the_shown_url_keeps_scheme_host_port_and_path_only() -> None:
    shown = url_without_credentials(f"https://ci:{PASSWORD}@[::1]:8443/a/b?code={TOKEN}#frag")
    assert shown == "https://[::1]:8443/a/b"
    assert url_without_credentials(f"http://h:bad-port/x?code={TOKEN}") == "http://h:bad-port/x"


async def test_a_dead_webhook_is_shown_without_its_query_or_user_info(
    tsettings, schema, db, receiver: Receiver, caplog
) -> None:
    settings = tsettings.model_copy(update={"webhook_secret": SECRET, "webhook_max_attempts": 1})
    receiver.script[f"/gone?code={TOKEN}"] = [(404, {})]  # the receiver sees the query
    hook = receiver.base.replace("http://", f"http://hooks:{PASSWORD}@") + f"/gone?code={TOKEN}"
    shown = f"{receiver.base}/gone"
    _, _, events = study_events(hook)
    caplog.set_level(logging.DEBUG)
    nc = await nats.connect(settings.nats_url)
    errors = await received_on(nc, subjects.errors("telemetry"), ErrorEvent)
    service = create_service(settings, schema=schema)
    try:
        async with service.running():
            for subject, event in events:
                await publish(nc.jetstream(), settings, subject, event)

            def dead() -> ErrorEvent | None:
                return next((e for e in errors if e.code == "webhook_dead"), None)

            event = await wait_for(dead, "the webhook_dead event")
            rows = await list_outbox(service.runtime.db)
    finally:
        await nc.close()
    assert event is not None and shown in event.message
    assert [(r["url"], r["state"]) for r in rows] == [(shown, "dead")]
    with TestClient(create_app(db, Settings())) as client:
        api = client.get("/api/webhooks")
    assert [r["url"] for r in api.json()] == [shown]
    url = TelemetrySettings().database_url  # the CLI, in this test's schema
    env = {
        **os.environ,
        "METATUNE_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}",
        "COLUMNS": "200",
    }
    printed = []
    for extra in (["--wide"], ["--json"]):  # --wide: each URL on one line
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "metatune_cli.cli", "webhooks", "list", *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        printed.append(done.stdout)
    assert shown in printed[0] and [r["url"] for r in json.loads(printed[1])] == [shown]
    shown_anywhere = [
        event.message,
        json.dumps(rows, default=str),
        api.text,
        *printed,
        *(r.getMessage() for r in caplog.records),
    ]
    assert receiver.received  # delivered with the credentials, shown without them
    for text in shown_anywhere:
        assert TOKEN not in text and PASSWORD not in text and "?code" not in text

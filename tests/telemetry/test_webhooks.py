"""Webhooks: signed per Standard Webhooks (verified with the ``standardwebhooks`` package), one
per state change, retries with Retry-After, dead letter and manual retry, SSRF refusals without
connecting, credentials never shown, and a hanging receiver that delays nothing else."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from uuid import uuid4

import httpx
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from metatune import contracts as c
from metatune import subjects
from metatune.inputs import parse_networks
from metatune_telemetry.app import create_service
from metatune_telemetry.settings import TelemetrySettings
from metatune_telemetry.webhooks.adapters.delivery import post
from metatune_telemetry.webhooks.adapters.outbox import list_outbox
from metatune_telemetry.webhooks.domain.signing import new_secret
from tests.support.samples import NOW, started
from tests.support.waiting import wait_for

from .conftest import count, publish, publish_ready
from .receiver import SECRET, Receiver, infeasible, study_events


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


async def test_signed_deliveries_one_per_state_change(tsettings, schema, js, receiver) -> None:
    settings = tsettings.model_copy(update={"webhook_secret": SECRET})
    study, job, events = study_events(f"{receiver.base}/hook")
    events += [infeasible(job, study, h) for h in range(4)]  # re-sent every hour: one state
    service = create_service(settings, schema=schema)
    async with service.running():
        await publish_ready(service, js, events)

        async def both_delivered() -> list[dict]:
            rows = await list_outbox(service.runtime.db)
            return rows if len(rows) == 2 and all(r["state"] == "delivered" for r in rows) else []

        outbox = await wait_for(both_delivered, "two deliveries in the outbox")
    assert sorted(r["event_type"] for r in outbox) == ["job.infeasible", "job.requested"]
    assert all(r["state"] == "delivered" and r["attempts"] == 1 for r in outbox)
    wh = Webhook(SECRET)
    types = []
    for _, headers, body in receiver.received:
        payload = wh.verify(
            body, {k.lower(): v for k, v in headers.items()}
        )  # raises unless the signature is valid
        types.append(payload["type"])
    assert sorted(types) == ["job.infeasible", "job.requested"]
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(
            receiver.received[0][2], {k.lower(): v for k, v in receiver.received[0][1].items()}
        )


async def test_retries_retry_after_dead_letter_and_manual_retry(
    tsettings, schema, js, receiver
) -> None:
    # backoff long enough that only Retry-After can bring the second attempt within the test
    settings = tsettings.model_copy(
        update={"webhook_secret": SECRET, "webhook_backoff_s": 600.0, "webhook_max_attempts": 3}
    )
    receiver.script["/later"] = [
        (429, {"retry-after": "1"}),
        (503, {"retry-after": "0"}),
        (200, {}),
    ]
    receiver.script["/broken"] = [(500, {"retry-after": "0"})]
    receiver.script["/moved"] = [(302, {"location": "/gone"})]
    receiver.script["/gone"] = [(404, {"retry-after": "0"})]
    _, _, later = study_events(f"{receiver.base}/later")
    _, _, broken = study_events(f"{receiver.base}/broken")
    _, _, moved = study_events(f"{receiver.base}/moved")
    service = create_service(settings, schema=schema)
    async with service.running():
        await publish_ready(service, js, later + broken + moved)

        async def states() -> dict[str, tuple[str, int]]:
            return {
                r["url"].rsplit("/", 1)[1]: (r["state"], r["attempts"])
                for r in await list_outbox(service.runtime.db)
            }

        async def settled() -> dict[str, tuple[str, int]]:
            found = await states()
            done = [found.get(k, ("",))[0] for k in ("later", "broken", "moved")]
            return found if done == ["delivered", "dead", "dead"] else {}

        found = await wait_for(settled, "later delivered, broken and moved dead")
        assert found == {"later": ("delivered", 3), "broken": ("dead", 3), "moved": ("dead", 3)}
        rows = {r["url"].rsplit("/", 1)[1]: r for r in await list_outbox(service.runtime.db)}
        assert (
            rows["broken"]["last_status"] == 500 and rows["moved"]["last_status"] == 404
        )  # a 3xx is no delivery
        receiver.script["/broken"] = [(204, {})]
        url = TelemetrySettings().database_url  # the CLI, in this test's schema
        env = {
            **os.environ,
            "METATUNE_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}",
        }
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "metatune_cli.cli", "webhooks", "retry", "--all-dead", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"queued": 2}

        async def broken_delivered() -> bool:
            return (await states())["broken"][0] == "delivered"

        await wait_for(broken_delivered, "the manually retried delivery")
        assert (await states())["broken"] == ("delivered", 1)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/hook",  # private
        "http://169.254.169.254/latest/meta-data",  # link-local (cloud metadata)
        "http://localhost:9/hook",  # a DNS name that resolves to loopback
        "http://[::1]:9/hook",
        "http://224.0.0.1/hook",  # multicast
        "http://0.0.0.0:9/hook",  # unspecified
    ],
)
async def test_ssrf_refused_without_connecting(url) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"connected to {request.url}")

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        outcome = await post(client, url, "{}", {}, allow=(), max_backoff_s=60)
    assert not outcome.delivered and outcome.permanent and outcome.error.startswith("refused")


async def test_redirect_to_loopback_refused(receiver) -> None:
    receiver.script["/hop"] = [(307, {"location": "http://127.0.0.2:9/steal"})]
    async with httpx.AsyncClient() as client:
        outcome = await post(
            client,
            f"{receiver.base}/hop",
            "{}",
            {},
            allow=parse_networks(["127.0.0.1/32"]),
            max_backoff_s=60,
        )
    assert outcome.permanent and "127.0.0.2" in outcome.error
    assert [p for p, _, _ in receiver.received] == ["/hop"]  # nothing reached the redirect target


async def test_hanging_receiver_delays_neither_ingestion_nor_others(
    tsettings, schema, js, receiver, caplog
) -> None:
    settings = tsettings.model_copy(update={"webhook_secret": SECRET, "webhook_timeout_s": 30.0})
    receiver.hang.add("/slow")
    _, _, slow = study_events(f"{receiver.base}/slow")
    _, _, fast = study_events(f"{receiver.base.replace('http://', 'http://alice:s3cr3t@')}/fast")
    job = uuid4()
    ticks = [
        started(job),
        *(
            (
                subjects.run_progress("fra1", job),
                c.RunProgress(
                    occurred_at=NOW, job_id=job, datacenter="fra1", step=i, total_steps=100
                ),
            )
            for i in range(50)
        ),
    ]
    service = create_service(settings, schema=schema)
    caplog.set_level(logging.DEBUG)
    async with service.running():
        await publish_ready(service, js, slow)
        await wait_for(lambda: any(p == "/slow" for p, _, _ in receiver.received))
        for subject, event in fast + ticks:
            await publish(js, settings, subject, event)
        await wait_for(lambda: any(p == "/fast" for p, _, _ in receiver.received))

        async def all_stored() -> bool:
            return (
                await count(service.runtime.db, "SELECT count(*) FROM event_log") == 55
            )  # with the start

        await wait_for(all_stored, "the 55 events stored")
        stored = await count(service.runtime.db, "SELECT count(*) FROM event_log")
        slow_state = await service.runtime.db.fetch(
            "SELECT state FROM webhook_outbox WHERE url LIKE '%%/slow'"
        )
        outbox = await list_outbox(service.runtime.db)
        receiver.release.set()
    assert (
        stored == 55 and slow_state[0][0] == "sending"
    )  # all stored while /slow still holds its delivery
    fast_headers = next(h for p, h, _ in receiver.received if p == "/fast")
    assert {k.lower(): v for k, v in fast_headers.items()}["authorization"].startswith("Basic ")
    assert "s3cr3t" not in json.dumps(outbox, default=str)
    assert "s3cr3t" not in caplog.text

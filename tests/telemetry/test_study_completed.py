"""``study.completed``: sent once when a stopped study's trials have all ended, whichever order
the stop and the last trial's final event arrive in and however often they are redelivered; and
per-endpoint secrets rotated with an overlap (both sign, then only the new), verified with the
``standardwebhooks`` package at a real receiver on 127.0.0.1."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from metatune import contracts as c
from metatune import subjects
from metatune_telemetry.app import create_service
from metatune_telemetry.webhooks.adapters.endpoint_secrets import rotate
from metatune_telemetry.webhooks.adapters.outbox import list_outbox
from metatune_telemetry.webhooks.domain.completion import StudyFacts, TrialFacts, completion
from metatune_telemetry.webhooks.domain.signing import EndpointSecret, live_secrets, new_secret
from tests.support.samples import CONFIG, NOW
from tests.support.waiting import wait_for

from .conftest import count, publish
from .receiver import Receiver
from .recording import study

SECRET = new_secret()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def verified(secret: str, headers: dict[str, str], body: bytes) -> bool:
    try:
        Webhook(secret).verify(body, {k.lower(): v for k, v in headers.items()})
    except WebhookVerificationError:
        return False
    return True


@pytest.mark.parametrize("stop_first", [True, False], ids=["stop-first", "trial-first"])
async def test_study_completed_once_whichever_order(
    tsettings, schema, js, receiver, stop_first
) -> None:
    settings = tsettings.model_copy(update={"webhook_secret": SECRET})
    sid, jobs, before, stop, last = study(f"{receiver.base}/hook")
    ending = [stop, last] if stop_first else [last, stop]
    service = create_service(settings, schema=schema)
    async with service.running():
        for subject, event in before + ending[:1]:
            await publish(js, settings, subject, event)
        await asyncio.wait_for(service.runtime.ready.wait(), 60)

        async def stored(n: int) -> bool:
            return await count(service.runtime.db, "SELECT count(*) FROM event_log") == n

        await wait_for(lambda: stored(len(before) + 1), "the events before the study's end")
        # half-way: stopped with a trial still open, or every trial ended but not stopped
        assert (
            await count(
                service.runtime.db,
                "SELECT count(*) FROM webhook_outbox WHERE event_type = 'study.completed'",
            )
            == 0
        )
        await publish(js, settings, *ending[1])
        # redelivered (a new message id, the same events), and a second final event of the
        # cancelled job (its run stopped): neither ends the study again
        for subject, event in before + ending:
            await publish(js, settings, subject, event, dedup=False)
        await publish(
            js,
            settings,
            subjects.runs_failed("fra1"),
            c.RunFailed(
                occurred_at=NOW + timedelta(hours=5),
                job_id=jobs[2],
                study_id=sid,
                datacenter="fra1",
                reason=c.FailureReason.stopped,
                message="stopped",
            ),
        )
        # a last state change to the same receiver (one writer: stored after all the above; one
        # delivery in flight per URL, in outbox order): delivered after everything queued before it
        sentinel = c.JobInfeasible(
            occurred_at=NOW + timedelta(hours=6), job_id=jobs[2], study_id=sid, reason="deadline"
        )
        await publish(js, settings, subjects.JOBS_INFEASIBLE, sentinel)

        async def sentinel_delivered() -> bool:
            rows = await list_outbox(service.runtime.db, limit=100)
            return any(
                r["event_type"] == "job.infeasible" and r["state"] == "delivered" for r in rows
            )

        await wait_for(sentinel_delivered, "the job.infeasible after the study's end")

        async def completed_delivered() -> bool:
            rows = await list_outbox(service.runtime.db, limit=100)
            return any(
                r["event_type"] == "study.completed" and r["state"] == "delivered" for r in rows
            )

        await wait_for(completed_delivered, "study.completed delivered")
    ends = [
        (h, b)
        for _, h, b in receiver.received
        if b"study.completed" in b and verified(SECRET, h, b)
    ]
    assert len(ends) == 1
    body = receiver.bodies("/hook")
    [end] = [b for b in body if b["type"] == "study.completed"]
    # when the event that ended it occurred
    assert end["timestamp"] == ending[1][1].occurred_at.isoformat().replace("+00:00", "Z")
    data = end["data"]
    assert data["study_id"] == str(sid) and data["name"] == "sst2-sweep"
    assert data["trials"] == {
        "requested": 3,
        "completed": 2,
        "early_stopped": 0,
        "failed": 0,
        "cancelled": 1,
    }
    assert data["best"] == {
        "job_id": str(jobs[1]),
        "config": CONFIG.model_copy(update={"rank": 8}).model_dump(mode="json"),
        "metric": 0.88,
        "metric_name": "accuracy",
        "adapter_key": "adapters/a1.tar",
    }
    assert data["energy_kwh"] == pytest.approx(4.0) and data["emissions_g"] == pytest.approx(500.0)
    # both runs ended 2 h after NOW, the deadline is a day after it
    assert (data["deadline_met"], data["trials_late"], data["late_by_s"]) == (True, 0, None)
    assert data["deadline_outcome"] == "met its deadline"


async def test_rotated_endpoint_secret_overlaps_then_only_the_new(
    tsettings, schema, db, js, receiver
) -> None:
    settings = tsettings.model_copy(update={"webhook_secret": SECRET})
    url = f"{receiver.base}/rotating"
    sid, jobs, before, _, _ = study(url)
    first = await rotate(db, url, overlap_s=3600)  # the default secret signs for an hour more
    service = create_service(settings, schema=schema)
    async with service.running():
        await publish(js, settings, *before[0])  # the study and its webhook URL
        await publish(js, settings, *before[1])  # job.requested: the first delivery
        await asyncio.wait_for(service.runtime.ready.wait(), 60)
        await wait_for(lambda: len(receiver.received) >= 1, "a delivery during the overlap")
        _, during_headers, during_body = receiver.received[0]
        second = await rotate(db, url, overlap_s=0)  # the overlap ends now: only the newest signs
        await publish(
            js,
            settings,
            subjects.JOBS_INFEASIBLE,
            c.JobInfeasible(occurred_at=NOW, job_id=jobs[0], study_id=sid, reason="deadline"),
        )
        await wait_for(lambda: len(receiver.received) >= 2, "a delivery after the overlap")
        _, after_headers, after_body = receiver.received[1]
    assert len(during_headers["webhook-signature"].split(" ")) == 2
    assert verified(first, during_headers, during_body) and verified(
        SECRET, during_headers, during_body
    )
    assert len(after_headers["webhook-signature"].split(" ")) == 1
    assert verified(second, after_headers, after_body)
    assert not verified(first, after_headers, after_body)
    assert not verified(SECRET, after_headers, after_body)


def test_live_secrets_until_the_overlap_ends() -> None:
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    old, new = new_secret(), new_secret()
    keys = [
        EndpointSecret(old, t0, retires_at=t0 + timedelta(hours=24)),
        EndpointSecret(new, t0 + timedelta(seconds=1)),
    ]
    assert live_secrets(keys, SECRET, t0 + timedelta(hours=1)) == [new, old]
    assert live_secrets(keys, SECRET, t0 + timedelta(hours=24)) == [new]
    assert live_secrets(
        [EndpointSecret(None, t0, t0 + timedelta(hours=1)), keys[1]], SECRET, t0
    ) == [new, SECRET]
    assert live_secrets([], SECRET, t0) == [SECRET]


def test_no_completion_until_stopped_and_every_trial_ended() -> None:
    sid = uuid4()
    done = TrialFacts(uuid4(), "completed", metrics={"val_loss": 0.4}, energy_wh=500)
    running = TrialFacts(uuid4(), None)
    facts = StudyFacts(sid, None, trials_requested=2, metric_name=None, trials=[done, running])
    assert completion(facts) is None  # a trial still runs
    assert completion(StudyFacts(sid, None, None, None, [done])) is None  # not stopped
    assert completion(StudyFacts(sid, None, 2, None, [done])) is None  # a trial not stored yet
    ended = completion(StudyFacts(sid, None, 1, None, [done]))
    assert ended is not None and ended.best is not None
    assert ended.best.metric_name == "neg_val_loss" and ended.best.metric == -0.4
    assert ended.energy_kwh == 0.5


def test_a_study_completed_after_its_deadline_says_by_how_much() -> None:
    sid, deadline = uuid4(), NOW
    on_time = TrialFacts(uuid4(), "completed", ended_at=NOW - timedelta(hours=1))
    late = [
        TrialFacts(uuid4(), "failed", ended_at=NOW + timedelta(minutes=40)),
        TrialFacts(uuid4(), "completed", ended_at=NOW + timedelta(hours=2, minutes=6)),
    ]
    cancelled = TrialFacts(uuid4(), "cancelled")  # never ran: neither late nor on time
    ended = completion(StudyFacts(sid, None, 4, None, [on_time, *late, cancelled], deadline))
    assert ended is not None
    assert (ended.deadline_met, ended.trials_late, ended.late_by_s) == (False, 2, 7560.0)
    assert ended.deadline_outcome == (
        "finished after its deadline (2 trials late, by up to 2 h 06 min)"
    )
    met = completion(StudyFacts(sid, None, 1, None, [on_time], deadline))
    assert met is not None and met.deadline_met and met.deadline_outcome == "met its deadline"

"""1000 malformed, oversized and forged messages across the subjects the services consume: each
becomes exactly one typed error event (invalid_message, message_too_large, wrong_datacenter,
unknown_job, a refused dataset path), and every service still serves valid traffic afterwards."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import nats
import pytest

from metatune import subjects
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    DatasetLocation,
    DatasetProfiled,
    DatasetSubmitted,
    ErrorEvent,
    JobCancelled,
    LoraConfig,
    RunCompleted,
)
from metatune_profiler.app import create_service as create_profiler
from metatune_profiler.settings import ProfilerSettings
from metatune_scheduler.app import create_service as create_scheduler
from metatune_scheduler.settings import SchedulerSettings
from metatune_trainer_agent.app import create_service as create_agent
from metatune_trainer_agent.settings import AgentSettings
from tests.support.builders import TINY_TRAINING, job_request, small_registry
from tests.support.waiting import wait_for

from .conftest import (
    RestartableNats,
    forecast_now,
    of,
    publish,
    stream_events,
    upload,
)

pytestmark = pytest.mark.chaos
FLOOD = 1000
LIMIT = 64 * 1024
OVERSIZED = b'{"pad": "' + b"x" * (LIMIT + 1024) + b'"}'
JOB = str(uuid4())


def _forged_assignment(spec) -> bytes:  # well-formed, but for another datacenter
    return Assignment(
        occurred_at=datetime.now(UTC),
        job_id=uuid4(),
        study_id=uuid4(),
        datacenter="osl1",
        action=AssignmentAction.start,
        plan_version=0,
        spec=spec,
        config=LoraConfig(**TINY_TRAINING, max_steps=2),
    ).to_bytes()


def _forged_submission(spec) -> bytes:  # a path outside the data roots
    outside = spec.model_copy(update={"dataset": DatasetLocation(kind="path", ref="/etc/passwd")})
    return DatasetSubmitted(
        occurred_at=datetime.now(UTC), study_id=uuid4(), spec=outside
    ).to_bytes()


def _cases(spec) -> list[tuple[str, object]]:
    """(subject, payload or payload factory): each consumed by exactly one of the services running."""
    malformed = [
        b"{not json",
        b"[]",
        b'{"job_id": "not-a-uuid"}',
        json.dumps({"event_id": str(uuid4())}).encode(),
        b"\xff\xfe binary",
    ]
    consumed = [
        subjects.JOBS_REQUESTED,
        subjects.JOBS_CANCELLED,
        subjects.forecasts("US-CAL-CISO"),
        subjects.run_progress("fra1", JOB),
        subjects.runs_paused("fra1"),
        subjects.runs_failed("fra1"),
        subjects.runs_completed("fra1"),
        subjects.agent_status("lon1"),
        subjects.assignments("fra1"),
        subjects.DATASETS_SUBMITTED,
    ]
    cases: list[tuple[str, object]] = [(s, m) for s in consumed for m in malformed]
    cases += [(s, OVERSIZED) for s in consumed]
    cases += [
        (subjects.assignments("fra1"), lambda: _forged_assignment(spec)),
        (subjects.DATASETS_SUBMITTED, lambda: _forged_submission(spec)),
        (
            subjects.JOBS_CANCELLED,
            lambda: JobCancelled(occurred_at=datetime.now(UTC), job_id=uuid4()).to_bytes(),
        ),
    ]
    return cases


async def test_a_flood_of_bad_messages_gives_one_typed_error_each_and_service_goes_on(
    chaos_nats: RestartableNats, binary_slice: Path, tmp_path: Path
) -> None:
    url = chaos_nats.url
    dataset = await upload(url, binary_slice)
    common = {
        "nats_url": url,
        "heartbeat_s": 0.5,
        "retry_backoff_s": 0.2,
        "max_message_bytes": LIMIT,
        "max_deliver": 2,
        "dataset_roots": [tmp_path / "roots"],
    }
    scheduler = create_scheduler(
        settings=SchedulerSettings(data_dir=tmp_path / "s", **common),
        registry=small_registry("fra1", "osl1", "lon1", "sjc1"),
        debounce_s=0.2,
    )
    agent = create_agent(
        "fra1",
        AgentSettings(
            data_dir=tmp_path / "a",
            agent_idle_seconds=0.05,
            agent_curve_stop=False,
            agent_progress_interval_s=0.0,
            **common,
        ),
    )
    profiler = create_profiler(ProfilerSettings(data_dir=tmp_path / "p", **common))
    valid = job_request(dataset, max_steps=2)
    flood_subjects: set[str] = set()
    async with scheduler.running(), agent.running(), profiler.running():
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            cases = _cases(valid.spec)
            for subject, payload in itertools.islice(itertools.cycle(cases), FLOOD):
                body = payload() if callable(payload) else payload
                flood_subjects.add(subject)
                await js.publish(subject, body)

            # the valid run below is assigned by hand, not by the scheduler: its run events are
            # refused there (foreign_run_event), which is not the flood's doing
            run_job = uuid4()

            def flood_errors(events) -> list[ErrorEvent]:
                valid_ids = (str(valid.job_id), str(valid.study_id), str(run_job))
                return [
                    e
                    for e in of(events, ErrorEvent)
                    if e.subject in flood_subjects and e.correlation_id not in valid_ids
                ]

            await wait_for(
                lambda: _count(url, flood_errors, FLOOD), "one error per bad message", timeout=240
            )

            # valid traffic still served: a plan for a job, a real (2-step) run, a profile
            for region, value in (
                ("DE", 300.0),
                ("NO", 20.0),
                ("GB", 200.0),
                ("US-CAL-CISO", 250.0),
            ):
                await publish(js, subjects.forecasts(region), forecast_now(region, value))
            await publish(js, subjects.JOBS_REQUESTED, valid)
            run = Assignment(
                occurred_at=datetime.now(UTC),
                job_id=run_job,
                study_id=valid.study_id,
                datacenter="fra1",
                action=AssignmentAction.start,
                plan_version=0,
                spec=valid.spec,
                config=LoraConfig(**TINY_TRAINING, max_steps=2),
            )
            await publish(js, subjects.assignments("fra1"), run)
            await publish(
                js,
                subjects.DATASETS_SUBMITTED,
                DatasetSubmitted(
                    occurred_at=datetime.now(UTC), study_id=valid.study_id, spec=valid.spec
                ),
            )

            def served(events) -> bool:
                return (
                    any(a.job_id == valid.job_id for a in of(events, Assignment))
                    and bool(of(events, RunCompleted, run.job_id))
                    and any(p.study_id == valid.study_id for p in of(events, DatasetProfiled))
                )

            await wait_for(lambda: _check(url, served), "valid traffic served", timeout=180)
        finally:
            await nc.close()
    events = await stream_events(url)
    errors = flood_errors(events)
    assert len(errors) == FLOOD
    codes = {e.code for e in errors}
    assert {"invalid_message", "message_too_large", "wrong_datacenter", "unknown_job"} <= codes
    assert len(codes) >= 5  # and the profiler's refusal of a path outside the data roots
    assert all(
        e.kind is not None and e.service in ("scheduler", "trainer-agent", "profiler")
        for e in errors
    )


async def _count(url: str, select, expected: int) -> bool:
    found = len(select(await stream_events(url)))
    assert found <= expected, f"{found} error events for {expected} bad messages"
    return found == expected


async def _check(url: str, predicate) -> bool:
    return predicate(await stream_events(url))

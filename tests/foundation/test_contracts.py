"""Contracts: strict validation, UTC times, correlation ids, and a JetStream round trip of each."""

from __future__ import annotations

import inspect
from datetime import datetime, timedelta, timezone

import nats
import pytest
from pydantic import ValidationError

from metatune import contracts as c
from metatune.bus import ensure_streams, headers_for, stream_for
from metatune.settings import Settings
from tests.support.samples import JOB, NOW, samples


def all_event_types() -> set[type[c.Event]]:
    return {
        obj
        for obj in vars(c).values()
        if inspect.isclass(obj) and issubclass(obj, c.Event) and obj is not c.Event
    }


def test_every_event_type_has_a_sample() -> None:
    assert {type(event) for _, event in samples()} == all_event_types()


def test_naive_datetime_is_rejected_and_aware_is_normalised_to_utc() -> None:
    with pytest.raises(ValidationError):
        c.ClockTick(occurred_at=datetime(2026, 1, 1, 12), hour=NOW, simulated=False)
    tick = c.ClockTick(
        occurred_at=datetime(2026, 1, 1, 13, tzinfo=timezone(timedelta(hours=1))),
        hour=NOW,
        simulated=False,
    )
    assert tick.occurred_at.utcoffset() == timedelta(0) and tick.occurred_at.hour == 12


def test_unknown_fields_and_out_of_range_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        c.LoraConfig(rank=0)
    with pytest.raises(ValidationError):
        c.LoraConfig(learning_rate=-1e-4)
    with pytest.raises(ValidationError):
        c.JobInfeasible(occurred_at=NOW, job_id=JOB, reason="x", surprise=1)


def test_forecast_shape_is_enforced() -> None:
    with pytest.raises(ValidationError, match="168"):
        c.CarbonForecast(
            occurred_at=NOW,
            region="DE",
            issued_at=NOW,
            start=NOW,
            model_version="v",
            g_per_kwh=[1.0] * 24,
            p10_g_per_kwh=[1.0] * 24,
            p90_g_per_kwh=[1.0] * 24,
        )


def test_correlation_id_comes_from_job_or_study() -> None:
    for _, event in samples():
        if hasattr(event, "job_id"):
            assert event.correlation_id == str(event.job_id)
        elif hasattr(event, "study_id"):
            assert event.correlation_id == str(event.study_id)


async def test_every_contract_round_trips_through_jetstream(settings: Settings) -> None:
    nc = await nats.connect(settings.nats_url)
    js = nc.jetstream()
    await ensure_streams(js, settings)
    try:
        for subject, event in samples():
            ack = await js.publish(
                subject,
                event.to_bytes(),
                headers=headers_for(event),
                stream=stream_for(subject, settings),
            )
            stored = await js.get_msg(ack.stream, ack.seq)
            assert stored.headers["Nats-Msg-Id"] == str(event.event_id)
            assert type(event).model_validate_json(stored.data) == event
    finally:
        await nc.close()

"""The step buffer: the steps between two progress events become the next event's points (a valid
``RunProgress``), a full buffer asks to be sent, a clock stepping back never makes an event
invalid, and a flush sends the newest step as an event of its own with the rest as points."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from metatune.contracts import RunAccounting, RunProgress
from metatune_trainer_agent.domain.points import StepBuffer
from metatune_trainer_agent.domain.run import Progress

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def step(n: int, loss: float | None = None) -> Progress:
    return Progress(
        kind="step",
        step=n,
        total_steps=100,
        train_loss=1.0 / n if loss is None else loss,
        val_loss=None,
        learning_rate=1e-3 / n,
        power_w=40.0,
        step_time_s=0.2,
        estimated_remaining_gpu_hours=0.1,
        accounting=RunAccounting(tokens_seen=300 * n, tokens_with_padding=330 * n),
    )


def event(progress: Progress, at: datetime, points) -> RunProgress:
    return RunProgress(
        occurred_at=at,
        job_id=uuid4(),
        datacenter="fra1",
        step=progress.step,
        total_steps=progress.total_steps,
        train_loss=progress.train_loss,
        learning_rate=progress.learning_rate,
        accounting=progress.accounting,
        points=points,
    )


def test_held_steps_become_the_next_events_points() -> None:
    buffer = StepBuffer()
    for n in range(1, 6):
        buffer.hold(step(n), T0 + timedelta(seconds=n))
    points = buffer.take()
    assert [p.step for p in points] == [1, 2, 3, 4, 5]
    assert points[2].train_loss == 1.0 / 3 and points[2].learning_rate == 1e-3 / 3
    assert (points[2].tokens_seen, points[2].tokens_with_padding) == (900, 990)
    assert points[2].occurred_at == T0 + timedelta(seconds=3)
    sent = event(step(6), T0 + timedelta(seconds=6), points)  # the contract accepts them
    assert [p.step for p in sent.points] == [1, 2, 3, 4, 5]
    assert buffer.take() == [] and buffer.flush() is None  # emptied


def test_a_non_finite_loss_is_sent_as_none() -> None:
    buffer = StepBuffer()
    buffer.hold(step(1, loss=float("nan")), T0)
    buffer.hold(step(2, loss=float("inf")), T0)
    assert [p.train_loss for p in buffer.take()] == [None, None]


def test_a_full_buffer_asks_to_be_sent() -> None:
    buffer = StepBuffer(limit=3)
    for n in range(1, 3):
        buffer.hold(step(n), T0)
    assert not buffer.full
    buffer.hold(step(3), T0)
    assert buffer.full


def test_a_clock_stepping_back_never_makes_the_event_invalid() -> None:
    buffer = StepBuffer()
    buffer.hold(step(1), T0 + timedelta(seconds=10))
    buffer.hold(step(2), T0)  # the clock went back 10 s
    at = buffer.latest(T0 + timedelta(seconds=1))
    assert at == T0 + timedelta(seconds=10)
    points = buffer.take()
    assert [p.occurred_at for p in points] == [at, at]
    event(step(3), at, points)


def test_a_flush_sends_the_newest_step_with_the_others_as_points() -> None:
    buffer = StepBuffer()
    for n in range(4, 8):
        buffer.hold(step(n), T0 + timedelta(seconds=n))
    held = buffer.flush()
    assert held is not None
    newest, at, points = held
    assert newest.step == 7 and at == T0 + timedelta(seconds=7)
    assert [p.step for p in points] == [4, 5, 6]
    event(newest, at, points)
    assert buffer.flush() is None

"""A restarted scheduler rebuilds the state it had: replaying the stream equals what it folded live.

Live, the scheduler's consumers lag behind the stream and its own outputs are folded the moment
they are published, so it sees events in another order than the stream holds them. The property:
at any restart point, replaying the stream's prefix gives the same jobs (status, cancellation,
location, checkpoint, deadline) as the live state once it has folded the same events. Nothing
cancelled comes back, nothing paused is forgotten, nothing completed runs again.
"""

from __future__ import annotations

import random
from datetime import timedelta
from uuid import NAMESPACE_DNS, uuid5

from hypothesis import example, given, settings
from hypothesis import strategies as st

from metatune import subjects
from metatune.contracts import (
    Assignment,
    AssignmentAction,
    Event,
    FailureReason,
    JobCancelled,
    RunAccounting,
    RunCompleted,
    RunFailed,
    RunMetrics,
    RunPaused,
    RunProgress,
)
from metatune_scheduler.adapters.replay import contract_for
from metatune_scheduler.adapters.runtime import subject_of
from metatune_scheduler.domain import Scheduler
from tests.support.builders import small_registry

from .conftest import NOW, forecast, job_id, job_requested, with_agents

REGIONS = {
    "fra1": [300, 250, 400, 120, 90, 500],
    "osl1": [10, 12, 14, 16, 18, 20],
}  # now is greenest: jobs start


def _scheduler() -> Scheduler:
    scheduler = with_agents(Scheduler(small_registry("fra1", "osl1")))
    for dc in scheduler.registry.datacenters:
        scheduler.apply(forecast(dc.region, REGIONS[dc.name]))
    return scheduler


def _snapshot(scheduler: Scheduler) -> dict:
    state = scheduler.state
    return {
        "jobs": {
            str(job.job_id): (
                job.status.value,
                job.cancel_reason,
                job.location,
                job.checkpoint_key,
                job.deadline,
            )
            for job in state.jobs.values()
        },
        "early_cancellations": dict(state.early_cancellations),
        "plan_version": state.last_plan.plan_version if state.last_plan else None,
        "plan": sorted(
            (str(job), [(dc, hours) for dc, hours, _ in stretches])
            for job, stretches in state.last_plan.stretches.items()
        )
        if state.last_plan
        else None,
    }


class World:
    """The stream, a lagging live scheduler, and agents that answer assignments."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.stream: list[Event] = []
        self.subjects: list[str] = []  # the subject each stream message was published on
        self.live = _scheduler()
        self.applied = 0  # stream position the live consumers have folded up to
        self.outputs: set[int] = (
            set()
        )  # stream positions of the scheduler's own outputs (folded at publish)
        self.live_order: list[
            int
        ] = []  # stream positions in the order the live scheduler folded them
        self.clock = NOW
        self.counter = 0

    def tick(self) -> None:
        self.clock += timedelta(minutes=7)

    def publish_input(self, event: Event) -> None:
        self.subjects.append(_input_subject(event))
        self.stream.append(event)

    def catch_up(self, upto: int | None = None) -> None:
        end = len(self.stream) if upto is None else upto
        while self.applied < end:
            if self.applied not in self.outputs:
                self.live.apply(self.stream[self.applied])
                self.live_order.append(self.applied)
            self.applied += 1

    def replan(self) -> None:
        self.publish_outputs(self.live.replan(self.clock))

    def place_new(self) -> None:
        """The fast path between full solves."""
        if (decision := self.live.place_new(self.clock)) is not None:
            self.publish_outputs(decision)

    def publish_outputs(self, decision) -> None:
        for event in decision.events():
            assert contract_for(subject_of(event)) is type(event)  # what is published is replayed
            self.outputs.add(len(self.stream))
            self.live_order.append(len(self.stream))
            self.subjects.append(subject_of(event))
            self.stream.append(event)
            self.live.apply(event)
            if isinstance(event, Assignment):
                self.agent_reacts(event)

    def eid(self, kind: str) -> object:
        self.counter += 1
        return uuid5(NAMESPACE_DNS, f"{kind}-{self.counter}")

    def agent_reacts(self, assignment: Assignment) -> None:
        """What the datacenter's agent publishes later (appended now; the live scheduler lags)."""
        job, dc, at = assignment.job_id, assignment.datacenter, self.clock + timedelta(minutes=1)
        acc = RunAccounting()
        roll = self.rng.random()
        if assignment.action in (AssignmentAction.start, AssignmentAction.resume):
            if roll < 0.3:
                self.publish_input(
                    RunProgress(
                        event_id=self.eid("p"),
                        occurred_at=at,
                        job_id=job,
                        datacenter=dc,
                        step=3,
                        total_steps=10,
                        estimated_remaining_gpu_hours=0.5,
                    )
                )
            elif roll < 0.5:
                self.publish_input(
                    RunCompleted(
                        event_id=self.eid("c"),
                        occurred_at=at,
                        job_id=job,
                        study_id=assignment.study_id,
                        datacenter=dc,
                        config=assignment.config,
                        metrics=RunMetrics(val_loss=0.5),
                        steps=10,
                        accounting=acc,
                    )
                )
            elif roll < 0.6:
                self.publish_input(
                    RunFailed(
                        event_id=self.eid("f"),
                        occurred_at=at,
                        job_id=job,
                        datacenter=dc,
                        reason=FailureReason.internal,
                        message="boom",
                    )
                )
        elif assignment.action is AssignmentAction.pause:
            self.publish_input(
                RunPaused(
                    event_id=self.eid("z"),
                    occurred_at=at,
                    job_id=job,
                    study_id=assignment.study_id,
                    datacenter=dc,
                    step=4,
                    checkpoint_key=str(job),
                    accounting=acc,
                )
            )
        elif assignment.action is AssignmentAction.stop:
            self.publish_input(
                RunFailed(
                    event_id=self.eid("s"),
                    occurred_at=at,
                    job_id=job,
                    datacenter=dc,
                    reason=FailureReason.stopped,
                    message="stopped",
                )
            )


def _input_subject(event: Event) -> str:
    match event:
        case JobCancelled():
            return subjects.JOBS_CANCELLED
        case RunProgress():
            return subjects.run_progress(event.datacenter, event.job_id)
        case RunPaused():
            return subjects.runs_paused(event.datacenter)
        case RunCompleted():
            return subjects.runs_completed(event.datacenter)
        case RunFailed():
            return subjects.runs_failed(event.datacenter)
    return subjects.JOBS_REQUESTED


def _replay_one(scheduler: Scheduler, subject: str, event: Event) -> None:
    """What the replay adapter does with one stored message: decode it by its subject's contract."""
    model = contract_for(subject)
    if model is not None:
        scheduler.apply(model.model_validate_json(event.model_dump_json()))


@st.composite
def histories(draw):
    seed = draw(st.integers(0, 2**20))
    steps = draw(
        st.lists(
            st.sampled_from(
                ["request", "cancel", "cancel-unknown", "replan", "fast", "lag", "tick"]
            ),
            min_size=4,
            max_size=28,
        )
    )
    restart_at = draw(st.floats(0.2, 1.0))
    return seed, steps, restart_at


@settings(max_examples=150, deadline=None)
@given(histories())
@example(
    (1, ["request", "lag", "cancel", "replan", "replan"], 1.0)
)  # a start sent before its cancellation was folded
@example((2, ["request", "replan", "tick", "cancel", "request", "replan", "lag", "replan"], 0.7))
@example(  # a run that failed before its stop was folded, the stop folded first live
    (
        13632,
        [
            *("request", "cancel-unknown", "cancel", "request", "request", "cancel", "cancel"),
            *("replan", "replan"),
        ],
        1.0,
    )
)
@example(
    (
        3,
        [
            "request",
            "lag",
            "fast",
            "request",
            "replan",
            "request",
            "fast",
            "tick",
            "fast",
            "replan",
        ],
        0.8,
    )
)
def test_replaying_the_stream_rebuilds_the_live_state(history) -> None:
    seed, steps, restart_at = history
    rng = random.Random(seed)
    world = World(rng)
    requested = 0
    for step in steps:
        if step == "request":
            world.publish_input(
                job_requested(
                    requested,
                    hours=rng.choice([1, 2, 3]),
                    deadline_h=rng.choice([4, 12, 48]),
                    home="fra1",
                    at=world.clock,
                )
            )
            requested += 1
        elif step in ("cancel", "cancel-unknown"):
            n = rng.randrange(max(requested, 1)) if step == "cancel" else 900 + rng.randrange(3)
            world.publish_input(
                JobCancelled(
                    event_id=world.eid("x"),
                    occurred_at=world.clock,
                    job_id=job_id(n),
                    reason=f"cancel {n}",
                )
            )
        elif step == "replan":
            world.catch_up(rng.randint(world.applied, len(world.stream)))  # consumers lag
            world.replan()
        elif step == "fast":
            world.catch_up(rng.randint(world.applied, len(world.stream)))
            world.place_new()
        elif step == "lag":
            world.catch_up(rng.randint(world.applied, len(world.stream)))
        else:
            world.tick()

    cut = min(len(world.stream), max(1, round(len(world.stream) * restart_at)))
    restarted = (
        _scheduler()
    )  # replays the stream's prefix in stream order, as adapters/replay.py does
    for subject, event in zip(world.subjects[:cut], world.stream[:cut], strict=True):
        _replay_one(restarted, subject, event)
    live = (
        _scheduler()
    )  # the same events in the order the live scheduler folded them, then the rest
    order = [i for i in world.live_order if i < cut]
    order += [i for i in range(cut) if i not in set(order)]
    for i in order:
        live.apply(world.stream[i])
    assert _snapshot(restarted) == _snapshot(live)
    world.catch_up()
    for subject, event in zip(
        world.subjects, world.stream, strict=True
    ):  # the rest: nothing cancelled comes back
        _replay_one(restarted, subject, event)
    for job in restarted.state.jobs.values():
        if job.cancel_reason is not None and job.status.value in ("pending", "paused"):
            raise AssertionError(f"cancelled job {job.job_id} would be started again")


def test_every_subject_the_scheduler_consumes_from_the_event_log_is_replayed() -> None:
    """The drift guard behind the cancellation bug: a consumer added without a replay entry is a
    state a restart forgets. Heartbeats and clock ticks live on the status stream (not replayed);
    job lookups are requests outside the log."""
    from metatune_scheduler.app import create_service

    service = create_service()
    consumed = {s.subject.template for s in service.broker.subscribers}
    examples = {subject.replace("*", "x1").replace(">", "x1") for subject in consumed}
    status_stream = {subjects.AGENTS_STATUS_ALL.replace("*", "x1"), subjects.CLOCK_TICK}
    requests = {
        subjects.JOBS_LOOKUP_ALL.replace("*", "x1")
    }  # request-reply: answered from state, never stored
    missing = sorted(
        subject for subject in examples - status_stream - requests if contract_for(subject) is None
    )
    assert not missing, f"consumed but not replayed after a restart: {missing}"

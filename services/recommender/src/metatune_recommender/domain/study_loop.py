"""A study's loop: which trials to request next, when the study stops, which pending trials are
fantasised. Pure: the state comes in and goes out as a value; the runtime keeps it and does the I/O.

The rules:

* the opening batch: trials ``0 .. min(TOP_K, spec.trials) - 1``, once;
* every finished trial (completed or failed) frees one slot: after ``n`` finished, ``min(budget,
  first + n)`` trials are requested in all. The next index is the count of those requested, never
  derived from the event at hand, so a redelivered event requests nothing, and an event handled
  after the knowledge base already holds later results catches up instead of skipping an index;
* the finished trials are counted by the loop itself (with the knowledge base's rows as they
  arrive), so a result handled before the knowledge base's consumer stored earlier ones still
  counts them: the study's last result always ends it;
* a slot freed once every trial is requested ends the study (``budget``); so does a best expected
  improvement below the threshold once the first batch's results are in (``expected_improvement``);
* a cancelled study stops (``cancelled``) whatever it stands at, once: a study cancelled before
  its profile arrived stops before its opening batch, which is then never requested;
* once stopped, nothing more is requested and the requested configurations are dropped: the loop
  keeps only that it stopped, so a late event changes nothing.

Job ids are stable: job = uuid5(study, trial index).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from pydantic import BaseModel, ConfigDict

from metatune.contracts import StopReason
from metatune.knowledge.records import KbRun, RunStatus

from .recommender import COLD_START, TOP_K, Advice, Recommendation


def job_id_for(study_id: UUID, index: int) -> UUID:
    return uuid5(NAMESPACE_URL, f"metatune:{study_id}:{index}")


@dataclass(frozen=True)
class FinishedTrial:
    """A study's finished trial, as the loop counts and scores it: from the knowledge base, or
    from the event just received (which the knowledge base may not hold yet)."""

    run_id: str
    config: dict[str, Any]
    metric: float | None
    metric_name: str | None
    status: RunStatus

    @classmethod
    def of(cls, run: KbRun) -> FinishedTrial:
        return cls(run.run_id, run.config, run.metric, run.metric_name, run.status)

    @classmethod
    def failed(cls, job_id: UUID) -> FinishedTrial:
        """A trial known finished (its failure just arrived) without a knowledge-base row yet."""
        return cls(str(job_id), {}, None, None, RunStatus.failed)


@dataclass(frozen=True)
class Ask:
    """The loop wants ``count`` trials, indices from ``start``, chosen given the study's results
    (``observed``: config, metric) with the ``pending`` configs fantasised."""

    start: int
    count: int
    observed: list[tuple[dict[str, Any], float]]
    pending: list[dict[str, Any]]
    continuation: bool  # False: the opening batch (no result yet, no EI stop)


@dataclass(frozen=True)
class Request:
    """Trials to request: (trial index, recommendation) each."""

    trials: list[tuple[int, Recommendation]]


@dataclass(frozen=True)
class Stop:
    reason: StopReason
    trials_requested: int


Outcome = Request | Stop


class StudyLoop(BaseModel):
    """One study's loop state: the trials requested so far (index -> configuration, JSON) and
    whether it stopped. Immutable: each transition returns the next state."""

    model_config = ConfigDict(frozen=True)

    study_id: UUID
    budget: int  # spec.trials
    requested: dict[int, dict[str, Any]] = {}  # emptied once the study stopped
    # the finished trials the loop has counted, by run id: the count never waits on the knowledge
    # base's own consumer having stored an earlier result (emptied once the study stopped)
    finished: dict[str, FinishedTrial] = {}
    stopped: StopReason | None = None

    @classmethod
    def new(cls, study_id: UUID, budget: int) -> StudyLoop:
        return cls(study_id=study_id, budget=budget)

    @property
    def first_batch(self) -> int:
        return min(TOP_K, self.budget)

    def opening(self) -> Ask | None:
        """The opening batch, unless it was requested already (a redelivered profile)."""
        if self.stopped is not None or self.requested:
            return None
        return Ask(0, self.first_batch, [], [], continuation=False)

    def counting(self, trials: Sequence[FinishedTrial]) -> StudyLoop:
        """The state with ``trials`` counted as finished: a trial already counted keeps the
        first record of it unless the new one is scored (the knowledge base's row of a
        completion the loop had counted from its event)."""
        merged = dict(self.finished)
        for trial in trials:
            known = merged.get(trial.run_id)
            if known is None or (known.metric is None and trial.metric is not None):
                merged[trial.run_id] = trial
        return self.model_copy(update={"finished": merged})

    def next(self, finished: Sequence[FinishedTrial]) -> Ask | Stop | None:
        """What the study's finished trials call for: more trials, the budget's stop, or nothing
        (a redelivered event, or a study already stopped)."""
        if self.stopped is not None:
            return None
        freed = self.first_batch + len(finished)
        count = min(self.budget, freed) - len(self.requested)
        if count > 0:
            return Ask(
                len(self.requested),
                count,
                observed(finished),
                self.pending(finished),
                continuation=True,
            )
        if freed > self.budget:
            return Stop(StopReason.budget, len(self.requested))
        return None

    def cancel(self) -> Stop | None:
        """The study's stop on its cancellation (None: it has stopped already, a redelivered
        cancellation or one after the study ended)."""
        if self.stopped is not None:
            return None
        return Stop(StopReason.cancelled, len(self.requested))

    def pending(self, finished: Sequence[FinishedTrial]) -> list[dict[str, Any]]:
        """The configurations of the trials requested and not finished (fantasised by the GP)."""
        done = {trial.run_id for trial in finished}
        return [
            config
            for index, config in sorted(self.requested.items())
            if str(job_id_for(self.study_id, index)) not in done
        ]

    def answer(self, ask: Ask, advice: Advice, *, ei_below_threshold: bool) -> Outcome:
        """The outcome of ``advice`` for ``ask``: the study stops when a continuation's best
        expected improvement is below the threshold (never on the cold-start portfolio, which
        has none), else the recommended trials within the budget."""
        if ask.continuation and advice.source != COLD_START and ei_below_threshold:
            return Stop(StopReason.expected_improvement, len(self.requested))
        room = range(ask.start, min(ask.start + ask.count, self.budget))
        return Request(list(zip(room, advice.recommendations, strict=False)))

    def after(self, outcome: Outcome) -> StudyLoop:
        """The state once ``outcome`` is published."""
        if isinstance(outcome, Stop):
            return self.model_copy(
                update={"requested": {}, "finished": {}, "stopped": outcome.reason}
            )
        added = {index: rec.config.model_dump(mode="json") for index, rec in outcome.trials}
        return self.model_copy(update={"requested": {**self.requested, **added}})


def observed(finished: Sequence[FinishedTrial]) -> list[tuple[dict[str, Any], float]]:
    """The scored results of the study (config, metric), failed trials left out."""
    return [
        (trial.config, trial.metric)
        for trial in finished
        if trial.metric is not None and trial.status != RunStatus.failed
    ]

"""The optimizer steps between two progress events, sent with the next one.

The agent publishes progress at most every ``agent_progress_interval_s``; each step in between
is held here as a :class:`~metatune.contracts.MetricPoint` and rides on the next progress event
(``RunProgress.points``), so telemetry stores one metric row per step with one message per
interval. When the run ends (completed, paused, stopped, failed) the steps still held are sent
as one last event (:meth:`StepBuffer.flush`): none is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from metatune.contracts import MAX_POINTS_PER_EVENT, MetricPoint

from .run import Progress


@dataclass
class StepBuffer:
    limit: int = MAX_POINTS_PER_EVENT  # a full buffer is sent at once, whatever the interval
    points: list[MetricPoint] = field(default_factory=list)
    _last: Progress | None = None  # the newest step held, as the run reported it

    @property
    def full(self) -> bool:
        return len(self.points) >= self.limit

    def hold(self, progress: Progress, at: datetime) -> None:
        """Keep a step the agent does not publish now (its time never before the previous one's:
        a clock stepped back must not make the next event invalid)."""
        if self.points and at < self.points[-1].occurred_at:
            at = self.points[-1].occurred_at
        loss = progress.train_loss
        self.points.append(
            MetricPoint(
                step=progress.step,
                occurred_at=at,
                train_loss=loss if loss is not None and math.isfinite(loss) else None,
                learning_rate=progress.learning_rate,
                tokens_seen=progress.accounting.tokens_seen,
                tokens_with_padding=progress.accounting.tokens_with_padding,
                step_time_s=progress.step_time_s,
            )
        )
        self._last = progress

    def latest(self, at: datetime) -> datetime:
        """``at``, or the newest held step's time if that is later (an event is never earlier
        than the steps it carries)."""
        return max(at, self.points[-1].occurred_at) if self.points else at

    def take(self) -> list[MetricPoint]:
        """The steps held, for the progress event of the step after them; the buffer empties."""
        points, self.points, self._last = self.points, [], None
        return points

    def flush(self) -> tuple[Progress, datetime, list[MetricPoint]] | None:
        """The newest step held (to publish as an event of its own, at its time) and the steps
        before it (its points); None when nothing is held. The buffer empties."""
        if self._last is None:
            return None
        last, points = self._last, self.take()
        return last, points[-1].occurred_at, points[:-1]

"""The time grid of one plan: hourly near ``now``, coarser blocks later.

Periods are aligned to absolute UTC hours (a 3-hour block starts at 00, 03, 06 ... UTC), so
the blocks of two consecutive plans line up and a previous plan maps onto the next one as a
warm start. Inside a block the model only knows *how many* hours a job runs and the block's
mean carbon intensity; the exact hours are fixed when the block becomes hourly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

HOURS_168 = 168


def epoch_hour(moment: datetime) -> int:
    """Whole hours since the Unix epoch (the hour containing ``moment``)."""
    return int(moment.timestamp() // 3600)


def from_epoch_hour(hour: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(hours=int(hour))


def ceil_epoch_hour(moment: datetime) -> int:
    """The first whole hour at or after ``moment`` (a job may not start in an hour it cannot have whole)."""
    hour = epoch_hour(moment)
    return hour if from_epoch_hour(hour) == moment else hour + 1


@dataclass(frozen=True)
class Aggregation:
    """Hourly for ``hourly`` hours, then blocks of ``(until_hour, block_hours)`` up to the horizon."""

    horizon: int = HOURS_168
    hourly: int = 24
    blocks: tuple[tuple[int, int], ...] = ((72, 3), (HOURS_168, 6))

    @classmethod
    def none(cls, horizon: int = HOURS_168) -> Aggregation:
        return cls(horizon=horizon, hourly=horizon, blocks=())

    @property
    def is_hourly(self) -> bool:
        return self.hourly >= self.horizon


@dataclass(frozen=True)
class Periods:
    """``offset[t]`` (hours from the first hour) and ``length[t]`` (hours) of each period."""

    first_hour: int  # epoch hour of offset 0
    offset: np.ndarray
    length: np.ndarray

    @property
    def count(self) -> int:
        return len(self.offset)

    @property
    def horizon(self) -> int:
        return int(self.offset[-1] + self.length[-1]) if self.count else 0

    @classmethod
    def build(cls, first_hour: int, aggregation: Aggregation) -> Periods:
        offsets: list[int] = []
        lengths: list[int] = []
        hourly = min(aggregation.hourly, aggregation.horizon)
        offsets.extend(range(hourly))
        lengths.extend([1] * hourly)
        position = hourly
        for until, size in aggregation.blocks:
            until = min(until, aggregation.horizon)
            while position < until:
                absolute = first_hour + position
                end = min(until, (absolute // size + 1) * size - first_hour)
                offsets.append(position)
                lengths.append(end - position)
                position = end
        if position < aggregation.horizon:  # the tail is hourly if no block covers it
            offsets.extend(range(position, aggregation.horizon))
            lengths.extend([1] * (aggregation.horizon - position))
        return cls(
            first_hour, np.asarray(offsets, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
        )

    def period_of_offset(self) -> np.ndarray:
        """Period index of every hour offset in the horizon."""
        return np.repeat(np.arange(self.count), self.length)

    def middle(self) -> np.ndarray:
        """(T,) hours from the first hour to the middle of each period (0 for the first hour)."""
        return self.offset + (self.length - 1) / 2.0

    def mean(self, hourly: np.ndarray) -> np.ndarray:
        """Average an hourly array (last axis = hour offsets) over each period."""
        sums = np.add.reduceat(hourly[..., : self.horizon], self.offset, axis=-1)
        return np.asarray(sums / self.length)

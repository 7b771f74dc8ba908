"""One scheduling problem as numpy arrays: what both model builders read.

Shapes: J jobs, D datacenters, T periods (see :mod:`.horizon`). Units: hours, GPUs, kW,
gCO2eq/kWh, gCO2eq.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from .horizon import Periods

ANTICIPATED_QUANTILE = 0.5  # default price of an anticipated job's unplaced hour (METATUNE_SCHEDULER_ANTICIPATED_QUANTILE)
DELAY_PREMIUM = 0.03  # default gCO2eq/kWh added per hour an hour of work is deferred (METATUNE_SCHEDULER_DELAY_PREMIUM)


@dataclass(frozen=True)
class Keep:
    """Hours of the previous plan a job is credited for keeping (hysteresis, sparse): hour cell
    ``(job[k], dc[k], period[k])`` costs ``grams[k]`` less, so a plan that moves the job must save
    more than the credit (see :mod:`.preferences`)."""

    job: np.ndarray
    dc: np.ndarray
    period: np.ndarray
    grams: np.ndarray

    def __post_init__(self) -> None:
        if not len(self.job) == len(self.dc) == len(self.period) == len(self.grams):
            raise ValueError("a Keep's job, dc, period and grams differ in length")


@dataclass(frozen=True)
class Instance:
    periods: Periods
    need: np.ndarray  # (J,) hours each job still has to run in this plan
    gpus: np.ndarray  # (J,) GPUs a job occupies while it runs
    power_kw: np.ndarray  # (J,) IT power of the whole job while it runs
    pue: np.ndarray  # (D,)
    intensity: np.ndarray  # (D, T) mean forecast carbon intensity of each period
    capacity: np.ndarray  # (D, T) GPUs free in each hour of the period
    usable: np.ndarray  # (J, D, T) hours of period t job j may run at d (0: not allowed)
    switch_g: np.ndarray  # (J, D) emissions of moving the job's checkpoint to d (0 where it is)
    power_cap_kw: np.ndarray | None = None  # (D,) IT power limit per datacenter, None: no limit
    optional: np.ndarray | None = (
        None  # (J,) bool: anticipated jobs, whose unplaced hours are cheap
    )
    optional_quantile: float = ANTICIPATED_QUANTILE  # an anticipated job's unplaced hour costs this quantile of its usable hours
    delay_price: np.ndarray | None = (
        None  # (J,) gCO2eq/kWh added per hour from the plan's start (carbon preference balanced)
    )
    finish_price: np.ndarray | None = (
        None  # (J,) gCO2eq/kWh added per hour past ``finish_from`` (carbon preference fastest)
    )
    finish_from: np.ndarray | None = None  # (J,) hour offset of a job's earliest possible last hour
    keep: Keep | None = None  # hours credited for staying where the previous plan had them

    def __post_init__(self) -> None:
        jobs, dcs, periods = len(self.need), len(self.pue), self.periods.count
        expected = {
            "gpus": (jobs,),
            "power_kw": (jobs,),
            "intensity": (dcs, periods),
            "capacity": (dcs, periods),
            "usable": (jobs, dcs, periods),
            "switch_g": (jobs, dcs),
        }
        for name, shape in expected.items():
            if getattr(self, name).shape != shape:
                raise ValueError(f"{name} has shape {getattr(self, name).shape}, expected {shape}")

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.need), len(self.pue), self.periods.count

    def room(self) -> np.ndarray:
        """(D, T) GPU-hours each datacenter offers in each period: the right-hand side of the
        capacity rows, which the bounds, the column generation and the heuristics all price."""
        return np.asarray(self.capacity * self.periods.length[None, :].astype(float))

    def hour_cost(self) -> np.ndarray:
        """(J, D, T) gCO2eq of one hour of job j at d in period t: R_j * PUE_d * C_{d,t}, plus the
        job's carbon-preference price of time, R_j * PUE_d * (delay_price_j * m_t + finish_price_j *
        max(0, m_t - finish_from_j)) with m_t the period's middle offset, less the hysteresis
        credit of the hours the previous plan gave it (:mod:`.preferences`). Computed once per
        instance (a re-plan reads it about ten times: 0.05 s each at 1000 x 12) and read-only."""
        return self._hour_cost

    @functools.cached_property
    def _hour_cost(self) -> np.ndarray:
        cost = self.power_kw[:, None, None] * (self.pue[:, None] * self.intensity)[None, :, :]
        if self.delay_price is not None or self.finish_price is not None:
            middle = self.periods.middle()[None, :]
            time = np.zeros((len(self.need), self.periods.count))
            if self.delay_price is not None:
                time += self.delay_price[:, None] * middle
            if self.finish_price is not None and self.finish_from is not None:
                time += self.finish_price[:, None] * np.maximum(
                    middle - self.finish_from[:, None], 0.0
                )
            cost = cost + self.power_kw[:, None, None] * self.pue[None, :, None] * time[:, None, :]
        if self.keep is not None and len(self.keep.job):
            cost = np.array(cost, copy=True)
            cost[self.keep.job, self.keep.dc, self.keep.period] -= self.keep.grams
        cost = np.asarray(cost)
        cost.flags.writeable = False
        return cost

    def with_usable(self, usable: np.ndarray) -> Instance:
        """The same problem with other usable hours (sites fixed, a restriction): the hour costs
        do not depend on them, so the copy shares them rather than computing them again."""
        copy = dataclasses.replace(self, usable=usable)
        if "_hour_cost" in self.__dict__:
            copy.__dict__["_hour_cost"] = self._hour_cost
        return copy

    def carbon_blind(self) -> Instance:
        """The same rows with every cost 0 but the unmet hours': a pure feasibility model."""
        return dataclasses.replace(
            self,
            intensity=np.zeros_like(self.intensity),
            switch_g=np.zeros_like(self.switch_g),
            delay_price=None,
            finish_price=None,
            keep=None,
        )

    def integral(self) -> np.ndarray:
        """(J,) bool: jobs whose hours and site are integer. An anticipated job is expected work,
        not a job to pack: it is fluid (continuous hours, split across sites), which prices the
        demand it stands for without adding integer variables to branch on."""
        return np.ones(len(self.need), dtype=bool) if self.optional is None else ~self.optional

    def unmet_penalty(self) -> np.ndarray:
        """(J,) cost of one hour a job cannot get: dearer than any placement, so used only if
        forced. An optional (anticipated) job's hour costs the ``optional_quantile`` of its usable
        hours instead (1.0: the dearest): the plan keeps room for it where that pays, and drops it
        before any requested job's hour. Below the dearest, because an expected job that finds the
        clean room taken goes to its next-best hour, not its worst (measured on a tight week: S*
        0.242 t at 1.0, 0.217 t at 0.5, 0.186 t without anticipation). Computed once per
        instance, read-only."""
        return self._unmet_penalty

    @functools.cached_property
    def _unmet_penalty(self) -> np.ndarray:
        cost = self.hour_cost()
        top = float(cost.max()) if cost.size else 1.0
        penalty = np.full(
            len(self.need), 1e3 * max(top, 1.0) + 1e3 * float(self.switch_g.max(initial=0.0))
        )
        for j in np.nonzero(self.optional)[0] if self.optional is not None else ():
            usable = cost[j][self.usable[j] > 0]
            penalty[j] = float(np.quantile(usable, self.optional_quantile)) if usable.size else 0.0
        penalty.flags.writeable = False
        return penalty

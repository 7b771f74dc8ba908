"""One scheduling problem as numpy arrays: what both model builders read.

Shapes: J jobs, D datacenters, T periods (see :mod:`.horizon`). Units: hours, GPUs, kW,
gCO2eq/kWh, gCO2eq.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .horizon import Periods

ANTICIPATED_QUANTILE = 0.5  # default price of an anticipated job's unplaced hour (METATUNE_SCHEDULER_ANTICIPATED_QUANTILE)
DELAY_PREMIUM = 0.03  # default gCO2eq/kWh added per hour an hour of work is deferred (METATUNE_SCHEDULER_DELAY_PREMIUM)


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
        """(J, D, T) gCO2eq of one hour of job j at d in period t: R_j * PUE_d * C_{d,t}."""
        return np.asarray(
            self.power_kw[:, None, None] * (self.pue[:, None] * self.intensity)[None, :, :]
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
        0.242 t at 1.0, 0.217 t at 0.5, 0.186 t without anticipation)."""
        cost = self.hour_cost()
        top = float(cost.max()) if cost.size else 1.0
        penalty = np.full(
            len(self.need), 1e3 * max(top, 1.0) + 1e3 * float(self.switch_g.max(initial=0.0))
        )
        for j in np.nonzero(self.optional)[0] if self.optional is not None else ():
            usable = cost[j][self.usable[j] > 0]
            penalty[j] = float(np.quantile(usable, self.optional_quantile)) if usable.size else 0.0
        return penalty

"""Scheduling instances for the MILP's tests: one checked by hand, and random ones (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from metatune_scheduler.domain import Aggregation, Periods, SolveLimits
from metatune_scheduler.domain.instance import Instance

EXACT = SolveLimits(time_limit_s=30, mip_rel_gap=0.0)


def hand_instance() -> Instance:
    """Two datacenters, three jobs, eight hours.

    A is clean in hours 2-3 (10 g/kWh) and dirty otherwise (100); B is flat 50. Each has 4 GPUs.
    Job 0: 2 h, 4 GPUs, 2 kW.  Job 1: 2 h, 4 GPUs, 1 kW.  Job 2: 1 h, 2 GPUs, 1 kW, only A, due by hour 2.
    Only one 4-GPU job fits A's clean hours: the 2 kW one (2*2*10 = 40) rather than the 1 kW one,
    which goes to B (2*1*50 = 100); job 2 takes a dirty A hour (100). Optimum: 240 g.
    """
    periods = Periods.build(0, Aggregation.none(horizon=8))
    usable = np.ones((3, 2, 8), dtype=np.int64)
    usable[2, 1, :] = 0
    usable[2, 0, 2:] = 0
    return Instance(
        periods=periods,
        need=np.array([2, 2, 1]),
        gpus=np.array([4, 4, 2]),
        power_kw=np.array([2.0, 1.0, 1.0]),
        pue=np.array([1.0, 1.0]),
        intensity=np.array([[100, 100, 10, 10, 100, 100, 100, 100], [50] * 8], dtype=float),
        capacity=np.full((2, 8), 4.0),
        usable=usable,
        switch_g=np.zeros((3, 2)),
    )


@st.composite
def instances(draw) -> Instance:
    jobs, dcs, horizon = draw(st.integers(1, 4)), draw(st.integers(1, 3)), 12
    aggregation = draw(
        st.sampled_from(
            [
                Aggregation.none(horizon),
                Aggregation(horizon=horizon, hourly=4, blocks=((horizon, 3),)),
            ]
        )
    )
    periods = Periods.build(draw(st.integers(0, 5)), aggregation)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    need = rng.integers(1, 5, jobs)
    deadline = np.minimum(need + rng.integers(0, 8, jobs), horizon)
    allowed_hour = (np.arange(horizon)[None, :] < deadline[:, None])[:, None, :] & (
        rng.random((jobs, dcs)) < 0.8
    )[:, :, None]
    usable = np.add.reduceat(allowed_hour.astype(np.int64), periods.offset, axis=2)
    return Instance(
        periods=periods,
        need=need,
        gpus=rng.integers(1, 4, jobs),
        power_kw=rng.uniform(0.5, 3, jobs),
        pue=rng.uniform(1, 1.5, dcs),
        intensity=periods.mean(rng.uniform(10, 500, (dcs, horizon))),
        capacity=rng.integers(2, 6, (dcs, periods.count)).astype(float),
        usable=usable,
        switch_g=rng.uniform(0, 200, (jobs, dcs)) * (rng.random((jobs, dcs)) < 0.5),
        optional=rng.random(jobs) < 0.3,
    )

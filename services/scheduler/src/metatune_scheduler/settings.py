"""The settings of the scheduler, over the platform's (:class:`metatune.settings.Settings`):
the same ``METATUNE_*`` environment variables, the same ``.env``; the README's configuration
table lists them under their service."""

from __future__ import annotations

from pydantic import Field

from metatune.settings import Settings


class SchedulerSettings(Settings):
    """The scheduler's own."""

    agent_lease_s: float = Field(
        20.0,
        gt=0,
        description="Real seconds an agent may stay silent (no status heartbeat) before the scheduler declares it lost and re-plans its jobs from their checkpoints",
    )
    scheduler_solve_duty: float = Field(
        0.01,
        gt=0,
        le=1,
        description="Share of the event loop's time full solves asked for by new jobs alone may take; 1: no wait",
    )
    scheduler_anticipate_h: int = Field(
        0,
        ge=0,
        le=72,
        description="Hours ahead the scheduler keeps room for expected jobs (requests of past days at the same hours); "
        "0: none (see the scheduler README)",
    )
    scheduler_anticipation_days: int = Field(
        1,
        ge=1,
        le=14,
        description="Past days whose requests, each counted 1/N, make the expected demand of an hour",
    )
    scheduler_anticipated_quantile: float = Field(
        0.5,
        ge=0,
        le=1,
        description="An expected job's unplanned hour costs this quantile of its usable hours "
        "(1: the dearest); lower: fewer requested jobs displaced",
    )
    scheduler_delay_premium: float = Field(
        0.03,
        ge=0,
        description="gCO2eq/kWh added to the forecast per hour of delay, so of two nearly as clean hours the earlier wins",
    )
    scheduler_hysteresis_share: float = Field(
        0.05,
        ge=0,
        lt=1,
        description="A job whose planned start is near keeps it unless a re-plan moving it saves more than this share of its emissions; 0: no hysteresis",
    )
    scheduler_hysteresis_near_h: int = Field(
        6,
        ge=0,
        le=168,
        description="Hours ahead within which a job's planned start counts as near (scheduler hysteresis)",
    )
    scheduler_min_run_h: float = Field(
        1.0,
        ge=0,
        description="Clock hours a started or resumed job runs, on top of its measured start-up, before it may be paused or moved (and not before a new checkpoint)",
    )
    scheduler_startup_wall_s: float = Field(
        30.0,
        ge=0,
        description="Real seconds a start or resume is assumed to cost (loading model and data) until an agent has measured one (converted to clock hours)",
    )

"""Each hour's round, run once and published: the forecaster service's runtime.

A round claims its hour (:class:`~metatune_forecaster.domain.rounds.Rounds`: a tick delivered
again, or the start-up round of the same hour, runs nothing), forecasts every region, keeps each
fresh forecast in KV before anyone sees it, publishes fresh or stale forecasts and reports a
provider's failure as one error event; a round that ends after its hour is an error event too,
and the heartbeat shows the lag behind the clock.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from metatune import msgids, subjects
from metatune.bus import forecasts
from metatune.contracts import ErrorKind
from metatune.service import Service

from ..domain.rounds import Rounds
from .runtime import RegionForecaster


class ForecastPublisher:
    """What the service's tick, start-up and heartbeat loops call (``service.runtime``)."""

    def __init__(self, service: Service[ForecastPublisher], forecaster: RegionForecaster) -> None:
        self.service = service
        self.forecaster = forecaster
        self.rounds = Rounds()
        self.one_at_a_time = asyncio.Lock()  # the start-up round and a tick's
        self.recalled = asyncio.Event()  # the kept last good forecasts were read back

    def show_lag(self) -> None:
        """The service's health and status details: behind the clock or not, by how much."""
        now = self.service.clock.now()
        self.service.health_status = "behind" if self.rounds.behind(now) else "ok"
        self.service.status_details = {
            "last_hour": self.rounds.completed.isoformat() if self.rounds.completed else "",
            "lag_s": f"{self.rounds.lag(now).total_seconds():.0f}",
            "model": self.forecaster.model.version,
        }

    async def publish_round(self, hour: datetime) -> None:
        """The round of ``hour``, once; an error event if it ends after its hour."""
        if not self.rounds.claim(hour):
            return  # this hour's round ran, or runs, already (a tick delivered again)
        try:
            async with self.one_at_a_time:
                await self.forecast_and_publish(hour)
        except BaseException:
            self.rounds.abandon(hour)
            raise
        overrun = self.rounds.finish(hour, self.service.clock.now())
        if overrun is not None:
            await self.service.report_error(
                code="round_overran",
                kind=ErrorKind.unavailable,
                message=f"the round of {hour:%Y-%m-%dT%H:%MZ} ended {overrun} after its hour",
                details={"hour": hour.isoformat(), "overrun_s": f"{overrun.total_seconds():.0f}"},
            )
        self.show_lag()

    async def forecast_and_publish(self, hour: datetime) -> None:
        service, forecaster = self.service, self.forecaster
        if not self.recalled.is_set():  # before the first round: what a previous process kept
            regions = [site.region for site in forecaster.sites]
            forecaster.last_good.update(await forecasts.recall(service.js, regions))
            self.recalled.set()
        for outcome in await forecaster.round(hour, service.clock.now()):
            subject = subjects.forecasts(outcome.region)
            if outcome.failure is not None:
                await service.report_error(
                    code=outcome.code,
                    kind=ErrorKind.unavailable,
                    message=f"{outcome.region} at {hour:%Y-%m-%dT%H:%MZ}: {outcome.failure}",
                    subject=subject,
                    details={
                        "region": outcome.region,
                        "hour": hour.isoformat(),
                        "stale_published": outcome.forecast is not None,
                    },
                )
            if outcome.failure is None and outcome.forecast is not None:
                await forecasts.keep(service.js, outcome.forecast)  # kept before anyone sees it
            if outcome.forecast is not None:
                await service.publish(
                    subject, outcome.forecast, msg_id=msgids.forecast(outcome.region, hour)
                )

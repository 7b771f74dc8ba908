"""The trainer-agent service of one datacenter (``metatune-trainer-agent --datacenter NAME``).

Thin handlers over :class:`~metatune_trainer_agent.adapters.runtime.TrainerAgent`: assignments of
this datacenter (durable consumer ``trainer-agent-<dc>``), the region's carbon forecasts, and a
status heartbeat on ``metatune.agents.<dc>.status``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from faststream.exceptions import SkipMessage
from faststream.nats.annotations import NatsMessage
from nats.errors import Error as NatsError

from metatune import subjects
from metatune.bus import forecasts
from metatune.contracts import CarbonForecast
from metatune.service import Service
from metatune.settings import Settings

from .adapters.runtime import TrainerAgent
from .settings import AgentSettings

log = logging.getLogger("metatune.agent")

SERVICE_NAME = "trainer-agent"


def create_service(datacenter: str, settings: Settings | None = None) -> Service[TrainerAgent]:
    """The agent of ``datacenter``; its :class:`TrainerAgent` is ``service.runtime``."""
    settings = AgentSettings.of(settings)
    dc = settings.registry().get(subjects.token(datacenter))
    service: Service[TrainerAgent] = Service(
        SERVICE_NAME,
        instance=settings.service_name or f"{SERVICE_NAME}.{dc.name}",
        settings=settings,
    )
    agent = service.runtime = TrainerAgent(service, dc, settings)

    @service.consume(subjects.assignments(dc.name), durable=f"{SERVICE_NAME}-{dc.name}")
    async def on_assignment(body: dict[str, Any], message: NatsMessage) -> None:
        """Start, pause, resume or stop a job at this datacenter (an Assignment)."""
        if await agent.on_assignment(body, message):
            raise SkipMessage()  # held: the agent acknowledges it when the job ends

    @service.consume(subjects.forecasts(dc.region), durable=f"{SERVICE_NAME}-{dc.name}-forecasts")
    async def on_forecast(forecast: CarbonForecast) -> None:
        """The latest carbon-intensity forecast of this datacenter's region prices its energy."""
        agent.on_forecast(forecast)

    @service.background
    async def last_forecast() -> None:
        """The region's last forecast, from KV, so the hours trained before the next round (an
        agent started or restarted mid-hour) are priced too; the consumer's newer ones win."""
        try:
            kept = await forecasts.recall(service.js, [dc.region])
        except NatsError as exc:  # an older deployment without the bucket: the next round prices
            log.warning("no kept forecast of %s read at start: %s", dc.region, exc)
            return
        if dc.region in kept:
            agent.on_forecast(kept[dc.region])

    @service.background
    async def heartbeat() -> None:
        while True:
            status = agent.status()
            service.status_details = {
                "running_jobs": str(len(status.running_jobs)),
                "gpus_free": str(status.gpus_free),
            }
            await service.publish(subjects.agent_status(dc.name), status)
            await asyncio.sleep(agent.settings.agent_status_interval_s)

    service.app.on_shutdown(agent.shutdown)
    return service

"""What the platform's agents train on, from their statuses: the hardware the trials' costs are for.

A job's GPU-hours and energy are priced from the knowledge base's runs on the device its trials
will train on (:func:`.costs.measured_throughput`). Before this platform has runs of its own, the
agents' statuses say which device that is: the one offering the most GPUs (``cuda`` on a tie).
Agents that do not say their device are left out. A status older than the one held for its
datacenter (a redelivery) changes nothing. The statuses are not kept: a restarted service knows
the fleet again from the agents' next heartbeats (every ``METATUNE_AGENT_STATUS_INTERVAL_S``), and
prices from GPU runs until then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from metatune.contracts import AgentStatus


@dataclass
class Fleet:
    # datacenter -> (when, device or None, GPUs offered), from its latest status
    offered: dict[str, tuple[datetime, str | None, int]] = field(default_factory=dict)

    def fold(self, status: AgentStatus) -> None:
        """The datacenter's latest status replaces its previous one."""
        held = self.offered.get(status.datacenter)
        if held is None or held[0] <= status.occurred_at:
            self.offered[status.datacenter] = (
                status.occurred_at,
                status.device,
                status.gpus_total,
            )

    @property
    def device(self) -> str | None:
        """The device offering the most GPUs (None: no agent has said what it trains on)."""
        gpus: dict[str, int] = {}
        for _, device, total in self.offered.values():
            if device is not None:
                gpus[device] = gpus.get(device, 0) + total
        if not gpus:
            return None
        return max(gpus, key=lambda d: (gpus[d], d == "cuda"))

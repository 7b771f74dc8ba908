"""What the platform's agents train on, from their statuses: the hardware the trials' costs are for.

A job's GPU-hours and energy are priced from the knowledge base's runs on the device its trials
will train on (:func:`.costs.measured_throughput`). Before this platform has runs of its own, the
agents' statuses say which device that is: the one offering the most GPUs (``cuda`` on a tie, the
scheduler's preference for real GPUs). Agents that do not say their device are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metatune.contracts import AgentStatus


@dataclass
class Fleet:
    offered: dict[str, tuple[str, int]] = field(default_factory=dict)  # datacenter -> device, GPUs

    def fold(self, status: AgentStatus) -> None:
        """The datacenter's latest status replaces its previous one."""
        if status.device is None:
            self.offered.pop(status.datacenter, None)
        else:
            self.offered[status.datacenter] = (status.device, status.gpus_total)

    @property
    def device(self) -> str | None:
        """The device offering the most GPUs (None: no agent has said what it trains on)."""
        gpus: dict[str, int] = {}
        for device, total in self.offered.values():
            gpus[device] = gpus.get(device, 0) + total
        if not gpus:
            return None
        return max(gpus, key=lambda d: (gpus[d], d == "cuda"))

"""Agent liveness: a datacenter whose agent stays silent past its lease is lost.

Pure bookkeeping over a monotonic clock the caller passes in (real seconds, whatever the
platform's clock: heartbeats are sent every few real seconds on the simulated clock too). An
agent is expected from its first heartbeat, or from when the scheduler learns that jobs run
there (after a restart nothing has been heard yet: the lease starts then, not in the past).

Silence is only the agent's fault while the scheduler itself can hear: while the scheduler is
cut off from the bus (its connection dropped, or the server does not answer its own round trip:
a frozen server) no lease runs out, and once it is back every agent gets one full lease to
be heard again, so an outage of the bus (or of the scheduler's link to it) loses no agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Leases:
    lease_s: float
    last_heard: dict[str, float] = field(default_factory=dict)
    lost: set[str] = field(default_factory=set)
    connected: bool = True  # whether the scheduler itself reaches the bus

    def heard(self, datacenter: str, at: float) -> bool:
        """A heartbeat; returns True when it brings a lost datacenter back."""
        self.last_heard[datacenter] = at
        if datacenter in self.lost:
            self.lost.discard(datacenter)
            return True
        return False

    def expect(self, datacenter: str, at: float) -> None:
        """Start the lease of a datacenter not heard from yet (jobs are believed to run there)."""
        self.last_heard.setdefault(datacenter, at)

    def disconnected(self) -> None:
        """The scheduler lost the bus: nobody can be heard, so no lease runs out meanwhile."""
        self.connected = False

    def reconnected(self, at: float) -> None:
        """The scheduler is back on the bus: every agent not already lost gets a full lease from ``at``."""
        self.connected = True
        for datacenter, heard in self.last_heard.items():
            if datacenter not in self.lost:
                self.last_heard[datacenter] = max(heard, at)

    def expired(self, at: float) -> list[str]:
        """Datacenters silent past the lease and not yet declared lost (each is returned once per
        loss); none while the scheduler is disconnected."""
        if not self.connected:
            return []
        newly = sorted(
            dc
            for dc, heard in self.last_heard.items()
            if dc not in self.lost and at - heard > self.lease_s
        )
        self.lost.update(newly)
        return newly

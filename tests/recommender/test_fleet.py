"""The fleet's device, from the agents' statuses: the hardware the trials are priced for."""

from __future__ import annotations

from datetime import timedelta

from metatune.contracts import AgentStatus
from metatune_recommender.domain.fleet import Fleet
from tests.support.samples import NOW, agent_status


def status(datacenter: str, device: str | None, gpus: int, minutes: int = 0) -> AgentStatus:
    return agent_status(datacenter, device, gpus, NOW + timedelta(minutes=minutes))


def test_the_device_offering_most_gpus_is_the_fleets() -> None:
    fleet = Fleet()
    assert fleet.device is None
    fleet.fold(status("fra1", "cpu", 4))
    assert fleet.device == "cpu"
    fleet.fold(status("osl1", "cuda", 4))
    assert fleet.device == "cuda"  # a tie goes to the real GPUs
    fleet.fold(status("yyz1", "cpu", 1))
    assert fleet.device == "cpu"


def test_a_datacenters_latest_status_replaces_its_earlier_one() -> None:
    fleet = Fleet()
    fleet.fold(status("fra1", "cuda", 8))
    fleet.fold(status("osl1", "cpu", 4))
    fleet.fold(status("fra1", "cuda", 2, minutes=1))
    assert fleet.device == "cpu"
    fleet.fold(status("fra1", "cuda", 8))  # a redelivered older status changes nothing
    assert fleet.device == "cpu"
    fleet.fold(status("osl1", None, 4, minutes=1))  # an agent that no longer says: left out
    assert fleet.device == "cuda"

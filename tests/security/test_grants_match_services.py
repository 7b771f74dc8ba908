"""Every durable consumer a service declares is granted to its NATS user (stream, name and filter):
a service that adds a consumer without a grant would be refused at start under auth."""

from __future__ import annotations

import importlib

import pytest

from metatune.bus.auth import principals
from metatune.registry import default_registry
from metatune.settings import Settings

SERVICES = ["profiler", "recommender", "scheduler"]


def _granted(user: str) -> set[str]:
    (principal,) = [p for p in principals(default_registry()) if p.name == user]
    return set(principal.permissions.publish)


@pytest.mark.parametrize("name", SERVICES)
def test_a_services_durables_are_granted(name: str) -> None:
    app = importlib.import_module(f"metatune_{name}.app")
    kwargs = {"load_seed_kb": False} if name == "recommender" else {}
    service = app.create_service(Settings(), **kwargs)
    assert service.durables
    granted = _granted(name)
    for stream, durable, subject in service.durables:
        assert f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.{subject}" in granted, (
            durable,
            subject,
        )


def test_an_agents_durables_are_granted() -> None:
    app = importlib.import_module("metatune_trainer_agent.app")
    service = app.create_service("fra1", Settings(datacenter="fra1"))
    granted = _granted("trainer-agent.fra1")
    assert service.durables
    for stream, durable, subject in service.durables:
        assert f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.{subject}" in granted, (
            durable,
            subject,
        )

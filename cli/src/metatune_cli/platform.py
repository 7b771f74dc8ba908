"""The services that make up MetaTune, as ``metatune up`` starts them."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from .settings import CliSettings


@dataclass(frozen=True)
class ServiceSpec:
    name: str  # service name (errors subject, health)
    module: str  # python -m <module>
    instance: str  # health key; one per process

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


CORE_SERVICES = [
    ("profiler", "metatune_profiler"),
    ("recommender", "metatune_recommender"),
    ("forecaster", "metatune_forecaster"),
    ("scheduler", "metatune_scheduler"),
    ("telemetry", "metatune_telemetry"),
]
AGENT_MODULE = "metatune_trainer_agent"


def platform_services(settings: CliSettings) -> list[ServiceSpec]:
    """Every process of a local platform: the core services and one trainer-agent per local datacenter."""
    specs = [ServiceSpec(name, module, name) for name, module in CORE_SERVICES]
    specs += [
        ServiceSpec("trainer-agent", AGENT_MODULE, f"trainer-agent.{dc}")
        for dc in settings.local_datacenters
    ]
    return specs

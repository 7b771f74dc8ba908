"""The datacenter registry: one committed file every service reads the same way."""

from __future__ import annotations

import tomllib
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from .contracts import AgentStatus, Contract, RegionGroup
from .errors import ConfigurationError
from .subjects import token

# Where a region's observed intensity may come from: the embedded replay (the default, the demo's
# and the tests'), or a live provider the forecaster has an adapter for.
INTENSITY_SOURCES = (
    "replay",
    "electricity-maps",
    "watttime",
    "uk-carbon-intensity",
    "carbon-aware-sdk",
    "eia-930",
)


class Datacenter(Contract):
    name: str
    region: str = Field(description="grid region (Electricity Maps zone id)")
    region_group: RegionGroup
    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    pue: float = Field(ge=1.0, le=3.0, description="power usage effectiveness")
    gpu_model: str
    gpus: int = Field(ge=0)
    gpu_power_w: float = Field(gt=0, description="board power per GPU at full load, W")
    intensity_source: str = Field(
        "replay",
        description="where the region's observed carbon intensity comes from: "
        + ", ".join(INTENSITY_SOURCES),
    )
    intensity_zone: str | None = Field(
        None, description="the region's zone id at that source (default: region)"
    )

    @field_validator("name", "region")
    @classmethod
    def _subject_safe(cls, value: str) -> str:
        return token(value)

    @field_validator("intensity_source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if value not in INTENSITY_SOURCES:
            raise ValueError(
                f"unknown intensity_source {value!r}; known: {', '.join(INTENSITY_SOURCES)}"
            )
        return value

    def idle_status(self, at: datetime, gpus: int | None = None) -> AgentStatus:
        """What this datacenter's agent reports with ``gpus`` GPUs (the registry's figure by
        default), all free: for benches and tests of the scheduler without agents of their own."""
        count = self.gpus if gpus is None else gpus
        return AgentStatus(
            occurred_at=at,
            datacenter=self.name,
            region=self.region,
            gpus_total=count,
            gpus_free=count,
            gpu_model=self.gpu_model,
            power_per_gpu_w=self.gpu_power_w,
            pue=self.pue,
        )

    @property
    def zone(self) -> str:
        """The zone id to ask the intensity source for."""
        return self.intensity_zone or self.region


class Registry(Contract):
    datacenters: list[Datacenter] = Field(min_length=1)

    @field_validator("datacenters")
    @classmethod
    def _unique(cls, value: list[Datacenter]) -> list[Datacenter]:
        names = [dc.name for dc in value]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate datacenter names in {names}")
        feeds: dict[str, tuple[str, str]] = {}
        for dc in value:
            feed = feeds.setdefault(dc.region, (dc.intensity_source, dc.zone))
            if feed != (dc.intensity_source, dc.zone):
                raise ValueError(
                    f"datacenters of region {dc.region} name different intensity sources "
                    f"({feed[0]} {feed[1]!r} and {dc.intensity_source} {dc.zone!r}); "
                    "a region has one feed"
                )
        return value

    def get(self, name: str) -> Datacenter:
        for dc in self.datacenters:
            if dc.name == name:
                return dc
        raise ConfigurationError(f"unknown datacenter {name!r}; known: {', '.join(self.names())}")

    def names(self) -> list[str]:
        return [dc.name for dc in self.datacenters]

    def regions(self) -> list[str]:
        return sorted({dc.region for dc in self.datacenters})

    def in_group(self, group: RegionGroup | None) -> list[Datacenter]:
        return [dc for dc in self.datacenters if group is None or dc.region_group == group]

    def intensity_feed(self, region: str) -> tuple[str, str]:
        """``(source, zone id)`` that feeds ``region``'s observed intensity."""
        for dc in self.datacenters:
            if dc.region == region:
                return dc.intensity_source, dc.zone
        raise ConfigurationError(f"no datacenter in region {region!r}")


def load_registry(path: Path | None = None) -> Registry:
    """Load and validate a registry file (None: the embedded one); a bad file is a
    ConfigurationError at start-up. Services and the CLI take it from ``Settings.registry()``."""
    if path is None:
        return default_registry()
    return _load(path)


def _load(path: Path | None) -> Registry:
    try:
        if path is None:
            raw = resources.files("metatune").joinpath("data/datacenters.toml").read_bytes()
        else:
            raw = Path(path).read_bytes()
        data = tomllib.loads(raw.decode())
        return Registry(datacenters=data.get("datacenter", []))
    except (OSError, tomllib.TOMLDecodeError, ValidationError, ValueError) as exc:
        raise ConfigurationError(
            f"datacenter registry {path or '(embedded)'} is invalid: {exc}"
        ) from exc


@cache
def default_registry() -> Registry:
    """The embedded registry (the default of ``registry_path``): the demo's and the tests'."""
    return _load(None)

"""The datacenter registry: one committed file every service reads the same way."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import Field, ValidationError, field_validator

from .contracts import Contract, RegionGroup
from .errors import ConfigurationError
from .subjects import token


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

    @field_validator("name", "region")
    @classmethod
    def _subject_safe(cls, value: str) -> str:
        return token(value)


class Registry(Contract):
    datacenters: list[Datacenter] = Field(min_length=1)

    @field_validator("datacenters")
    @classmethod
    def _unique(cls, value: list[Datacenter]) -> list[Datacenter]:
        names = [dc.name for dc in value]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate datacenter names in {names}")
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


def load_registry(path: Path | None = None) -> Registry:
    """Load and validate a registry file; a bad file is a ConfigurationError at start-up."""
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
    return load_registry()

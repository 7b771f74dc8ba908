"""Registry files of a few datacenters, for the tests of which source feeds a region."""

from __future__ import annotations

from pathlib import Path

DC = """
[[datacenter]]
name = "{name}"
region = "{region}"
region_group = "NA"
latitude = 37.34
longitude = -121.89
pue = 1.2
gpu_model = "H100-80GB"
gpus = 8
gpu_power_w = 700
"""


def registry_file(tmp_path: Path, *entries: tuple[str, str, str]) -> Path:
    """A registry of ``(name, region, extra TOML lines)`` entries."""
    text = "".join(DC.format(name=name, region=region) + extra for name, region, extra in entries)
    path = tmp_path / "datacenters.toml"
    path.write_text(text)
    return path

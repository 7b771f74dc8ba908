"""The settings of the `metatune` CLI and the embedded platform (`metatune up`), over the platform's (:class:`metatune.settings.Settings`):
the same ``METATUNE_*`` environment variables, the same ``.env``; the README's configuration
table lists them under their service."""

from __future__ import annotations

from pydantic import Field

from metatune.settings import Settings


class CliSettings(Settings):
    """The CLI's own (`metatune up`, the embedded platform)."""

    local_datacenters: list[str] = Field(
        ["fra1", "osl1", "sjc1"],
        description="Datacenters whose trainer-agent `metatune up` starts locally",
    )
    up_timeout_s: float = Field(
        60.0, gt=0, description="Seconds `metatune up` waits for services to be healthy"
    )

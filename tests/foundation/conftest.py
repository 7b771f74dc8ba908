"""Fixtures of the foundation tests: the CLI's environment, and a private NATS to submit to."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext

from metatune.bus import ensure_streams
from metatune.settings import Settings


@pytest.fixture
def env_for(tmp_path: Path):
    def build(**overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
        env["METATUNE_DATA_DIR"] = str(tmp_path / "data")
        env.update(overrides)
        return env

    return build


@pytest.fixture
async def submitter(
    private_nats: str, env_for
) -> AsyncIterator[tuple[dict[str, str], JetStreamContext]]:
    """The CLI's environment against a private NATS, and that NATS's JetStream with the streams."""
    nc = await nats.connect(private_nats)
    js = nc.jetstream()
    await ensure_streams(js, Settings(nats_url=private_nats))
    yield env_for(METATUNE_NATS_URL=private_nats, HF_HUB_OFFLINE="1"), js
    await nc.close()

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from metatune.settings import Settings


@pytest.fixture
async def settings(module_nats: str) -> AsyncIterator[Settings]:
    """Settings on the module's server, with streams deleted after each test."""
    s = Settings(nats_url=module_nats, retry_backoff_s=0.2, heartbeat_s=0.5)
    yield s
    nc = await nats.connect(s.nats_url)
    js = nc.jetstream()
    for info in await js.streams_info():
        await js.delete_stream(info.config.name)
    await nc.close()


@pytest.fixture
def env_for(tmp_path: Path):
    def build(**overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
        env["METATUNE_DATA_DIR"] = str(tmp_path / "data")
        env.update(overrides)
        return env

    return build

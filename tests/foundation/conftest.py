from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import nats
import pytest

from metatune.embedded import servers
from metatune.embedded.probe import nats_answers_sync
from metatune.settings import Settings

from ..conftest import _wait, free_port


@pytest.fixture(scope="module")
def module_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server of this test module alone: bus tests see only their own streams, KV and consumers."""
    with _nats_server(tmp_path_factory.mktemp("nats")) as url:
        yield url


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
def private_nats(tmp_path: Path) -> Iterator[str]:
    """A nats-server of this test alone."""
    with _nats_server(tmp_path) as url:
        yield url


@contextmanager
def _nats_server(directory: Path) -> Iterator[str]:
    url = f"nats://127.0.0.1:{free_port()}"
    proc: subprocess.Popen[bytes] = servers.start_nats(url, directory, directory)
    try:
        _wait(lambda: nats_answers_sync(url, 0.5), "private NATS")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def env_for(tmp_path: Path):
    def build(**overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
        env["METATUNE_DATA_DIR"] = str(tmp_path / "data")
        env.update(overrides)
        return env

    return build

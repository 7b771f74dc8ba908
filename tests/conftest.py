"""Every test talks to a real NATS (JetStream) and a real PostgreSQL.

The configured URLs (METATUNE_NATS_URL / METATUNE_DATABASE_URL, default 127.0.0.1) are used
when they answer; otherwise this session starts embedded servers (the same code path as
`metatune up`) under a temporary directory and stops them at the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from metatune.bus.auth import principals
from metatune.bus.credentials import NatsSecrets, generate
from metatune.embedded import servers
from metatune.embedded.probe import nats_answers_sync, postgres_answers

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    """The team's datasets: $METATUNE_SHARED_DATA, else ../shared/data beside the checkout, else the
    team machines' copy (a clone elsewhere, e.g. CI's, still finds it)."""
    candidates = [
        os.environ.get("METATUNE_SHARED_DATA"),
        REPO / ".." / "shared" / "data",
        "/work/shared/data",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate).resolve()
    return (REPO / ".." / "shared" / "data").resolve()


SHARED_DATA = _shared_data()

_started: list[subprocess.Popen[bytes]] = []
_tmp: Path | None = None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pytest_configure(config: pytest.Config) -> None:
    global _tmp
    nats_url = os.environ.setdefault("METATUNE_NATS_URL", "nats://127.0.0.1:4222")
    db_url = os.environ.setdefault(
        "METATUNE_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    os.environ.setdefault("METATUNE_RETRY_BACKOFF_S", "0.2")
    _tmp = Path(tempfile.mkdtemp(prefix="metatune-tests-"))
    os.environ.setdefault("METATUNE_DATA_DIR", str(_tmp / "data"))
    if not nats_answers_sync(nats_url, 1.0):
        proc, url = start_secured_nats(_tmp)
        _started.append(proc)
        os.environ["METATUNE_NATS_URL"] = url
        _wait(lambda: nats_answers_sync(url, 0.5), "embedded NATS")
    if not postgres_answers(db_url, 1.0):
        url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
        _started.append(servers.start_postgres(url, _tmp, _tmp))
        os.environ["METATUNE_DATABASE_URL"] = url
        _wait(lambda: postgres_answers(url, 1.0), "embedded PostgreSQL")


def pytest_unconfigure(config: pytest.Config) -> None:
    for proc in reversed(_started):
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)


def _wait(check, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start")


@pytest.fixture
def shared_data() -> Path:
    """The team's real datasets (../shared/data); tests that need them skip loudly if absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA


def start_secured_nats(
    directory: Path, url: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A nats-server with auth on, as `metatune up` starts it (a user per service, agent and
    submitter, credentials under ``directory/secrets``, kept if present); returns the process and
    the admin's URL (user and password in it, so plain ``nats.connect(url)`` works)."""
    store = nats_secrets(directory)
    url = url or f"nats://127.0.0.1:{free_port()}"
    return servers.start_nats(url, directory, directory, auth=store), store.admin_url(url)


def nats_secrets(directory: Path) -> NatsSecrets:
    return generate(directory / "secrets", principals())


@contextmanager
def nats_server(directory: Path) -> Iterator[str]:
    """A nats-server (JetStream, auth on) of our own: tests that use it see only their own
    streams, consumers and buckets; it yields the admin's URL."""
    directory.mkdir(parents=True, exist_ok=True)
    proc, url = start_secured_nats(directory)
    try:
        _wait(lambda: nats_answers_sync(url, 0.5), "private NATS")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def module_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server shared by the tests of one module."""
    with nats_server(tmp_path_factory.mktemp("nats")) as url:
        yield url


@pytest.fixture
def private_nats(tmp_path: Path) -> Iterator[str]:
    """A nats-server of one test alone."""
    with nats_server(tmp_path / "nats") as url:
        yield url


async def eventually(condition, timeout_s: float = 60.0, interval_s: float = 0.05) -> None:
    """Wait until ``condition()`` holds (an event crossed the bus), failing after ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, (
            f"condition not reached within {timeout_s} s"
        )
        await asyncio.sleep(interval_s)


async def received_on(nc, subject: str, contract: type) -> list:
    """Subscribe ``nc`` to ``subject``; the returned list fills with each message decoded as ``contract``."""
    received: list = []

    async def on_message(msg) -> None:
        received.append(contract.model_validate_json(msg.data))

    await nc.subscribe(subject, cb=on_message)
    return received

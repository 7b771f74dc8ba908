"""Chaos tests: real nats-server processes we can kill and restart, real services, real tiny
training runs with the embedded MiniLM (a handful of steps).

Every scenario starts its own nats-server (so it may stop it, and sees only its own streams) and
reads what happened from the stream itself at the end, not from a subscription that an outage
could have interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import nats
import pytest

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ObjectStore
from metatune.catalog import contract_for
from metatune.clock import floor_hour
from metatune.contracts import (
    CarbonForecast,
    DatasetLocation,
    Event,
)
from tests.support.servers import accepts, free_port, start_secured_nats, stop
from tests.support.waiting import wait_for_sync

AGENT_ENV = {
    "METATUNE_AGENT_CHECKPOINT_EVERY": "2",
    "METATUNE_AGENT_PROGRESS_INTERVAL_S": "0",
    "METATUNE_AGENT_IDLE_SECONDS": "0.05",
    "METATUNE_AGENT_STATUS_INTERVAL_S": "0.5",
    "METATUNE_AGENT_CURVE_STOP": "false",
    "METATUNE_HEARTBEAT_S": "0.5",
}


class RestartableNats:
    """One nats-server on a fixed port and store directory: stop it, start it again, state kept."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.address = f"nats://127.0.0.1:{free_port()}"
        self.url = (
            self.address
        )  # the admin's URL once started (auth on, same credentials across restarts)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.proc, self.url = start_secured_nats(self.directory, self.address)
        wait_for_sync(lambda: accepts(self.address), f"chaos nats-server at {self.address}")

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    def freeze(self) -> None:
        """SIGSTOP this test's own server: connections stay open, nothing is answered."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


@pytest.fixture
def chaos_nats(tmp_path: Path) -> Iterator[RestartableNats]:
    server = RestartableNats(tmp_path / "nats")
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            server.thaw()  # a frozen server does not stop
        server.stop()


@pytest.fixture(scope="session")
def binary_slice(tmp_path_factory: pytest.TempPathFactory, text_slice) -> Path:
    return text_slice(
        "intents_binary.jsonl.gz", 96, tmp_path_factory.mktemp("chaos-data") / "intents.jsonl"
    )


async def stream_events(url: str, stream: str = "METATUNE") -> list[tuple[str, Any]]:
    """Every message of ``stream`` as (subject, contract or raw bytes when it does not validate)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        out: list[tuple[str, Any]] = []
        if info.state.messages == 0:
            return out
        sub = await js.subscribe(">", stream=stream, ordered_consumer=True)
        try:
            while True:
                msg = await sub.next_msg(timeout=5)
                model = contract_for(msg.subject)
                try:
                    out.append(
                        (msg.subject, model.model_validate_json(msg.data) if model else msg.data)
                    )
                except Exception:
                    out.append((msg.subject, msg.data))
                if msg.metadata.num_pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        return out
    finally:
        await nc.close()


def of(events: list[tuple[str, Any]], kind: type, job_id: UUID | None = None) -> list[Any]:
    return [
        e
        for _, e in events
        if isinstance(e, kind) and (job_id is None or getattr(e, "job_id", None) == job_id)
    ]


async def upload(url: str, path: Path, key: str = "studies/intents-slice.jsonl") -> DatasetLocation:
    nc = await nats.connect(url)
    try:
        from metatune.bus import ensure_streams
        from metatune.settings import Settings

        await ensure_streams(nc.jetstream(), Settings(nats_url=url))
        await ObjectStore(nc.jetstream()).put_file(DATASETS_BUCKET, key, path)
    finally:
        await nc.close()
    return DatasetLocation(kind="object", ref=key)


def forecast_now(region: str, value: float, now: datetime | None = None) -> CarbonForecast:
    start = floor_hour(now or datetime.now(UTC)) - timedelta(hours=1)
    values = [value] * 168
    return CarbonForecast(
        occurred_at=datetime.now(UTC),
        region=region,
        issued_at=datetime.now(UTC),
        start=start,
        model_version="chaos",
        g_per_kwh=values,
        p10_g_per_kwh=values,
        p90_g_per_kwh=values,
    )


async def publish(url_or_js: Any, subject: str, event: Event) -> None:
    await url_or_js.publish(subject, event.to_bytes(), headers={"Nats-Msg-Id": str(event.event_id)})


@dataclass
class Child:
    """A service in its own process, to be killed with SIGKILL."""

    proc: subprocess.Popen[bytes]
    log: Path

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def spawn(module: str, env: dict[str, str], log: Path, *args: str) -> Child:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")}
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env={**clean, **env},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Child(proc, log)


__all__ = ["AGENT_ENV", "subjects"]

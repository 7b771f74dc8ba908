"""``metatune events``: the bus, pretty-printed."""

from __future__ import annotations

import asyncio
import json

import typer
from nats.js.api import ConsumerConfig, DeliverPolicy
from rich.console import Console

from ..errors import BusUnavailable
from ..settings import get_settings
from .connect import bus, fail

console = Console()

_STYLE = {"errors": "red", "datasets": "cyan", "jobs": "magenta", "forecasts": "blue", "plans": "yellow",
          "assignments": "green", "runs": "bright_green", "agents": "dim", "clock": "dim"}


def summarize(subject: str, payload: dict) -> str:
    """One line per event: the fields a person reads first."""
    keys = ("code", "message", "study_id", "job_id", "region", "datacenter", "action", "step", "reason",
            "expected_emissions_g", "hour")
    parts = [f"{k}={payload[k]}" for k in keys if payload.get(k) not in (None, "", [])]
    return " ".join(parts)[:200]


def events(
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events"),
    last: int = typer.Option(20, help="Events of history to show first"),
    subject: str = typer.Option("metatune.>", help="Subject filter"),
    status_stream: bool = typer.Option(False, "--status", help="Tail heartbeats and clock ticks instead"),
    raw: bool = typer.Option(False, "--json", help="Print each event as JSON"),
    hide: list[str] = typer.Option([], "--hide", help="Subject prefix to leave out, e.g. metatune.forecasts (repeatable)"),
) -> None:
    """Tail the event log (stream METATUNE), newest last."""
    settings = get_settings()
    stream = settings.status_stream_name if status_stream else settings.stream_name

    async def run() -> None:
        async with bus(settings) as nc:
            js = nc.jetstream()
            info = await js.stream_info(stream)
            start = max(info.state.first_seq, info.state.last_seq - last + 1)
            if info.state.messages == 0:
                start = info.state.last_seq + 1
            sub = await js.subscribe(subject, stream=stream, ordered_consumer=True,
                                     config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
                                                           opt_start_seq=start))
            while True:
                try:
                    msg = await sub.next_msg(timeout=None if follow else 1.0)
                except TimeoutError:
                    return
                if not any(msg.subject.startswith(prefix) for prefix in hide):
                    _print(msg.subject, msg.data, raw)

    try:
        asyncio.run(run())
    except BusUnavailable as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        pass


def _print(subject: str, data: bytes, raw: bool) -> None:
    try:
        payload = json.loads(data)
    except ValueError:
        payload = {"raw": data[:200].decode(errors="replace")}
    if raw:
        print(json.dumps({"subject": subject, **payload}))
        return
    family = subject.split(".")[1] if subject.count(".") >= 1 else ""
    style = _STYLE.get(family, "white")
    when = str(payload.get("occurred_at", ""))[:19]
    console.print(f"[dim]{when}[/dim] [{style}]{subject}[/{style}] {summarize(subject, payload)}", highlight=False)

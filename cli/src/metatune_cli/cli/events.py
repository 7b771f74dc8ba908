"""``metatune events``: the bus, pretty-printed."""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from dataclasses import dataclass

import typer
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from rich.console import Console
from rich.markup import escape

from metatune import subjects
from metatune.display import printable
from metatune.errors import BusUnavailable
from metatune.settings import Settings, get_settings

from ..tables import Cell, Column, render
from .calls import client
from .connect import bus, fail, unavailable
from .output import WIDE_FLAG

console = Console()
FORECASTS_PREFIX = "metatune.forecasts"
# time, subject, what: in the compact layout the subject without ``metatune.``, at a fixed width
# so that the rows --follow prints one by one line up, and ids to their first 8 hex digits
COLUMNS = (
    Column("time", no_wrap=True),
    Column("subject", compact_width=22),
    Column("event"),
)
UUID = re.compile(r"\b([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
# the kinds of event: the second part of the subjects the two streams hold (metatune.runs.> ...)
KINDS = tuple(
    s.split(".")[1] for s in subjects.EVENT_STREAM_SUBJECTS + subjects.STATUS_STREAM_SUBJECTS
)
KIND_HELP = f"Only these kinds (the subject's second part): {', '.join(KINDS)} (repeatable)"

_STYLE = {
    "errors": "red",
    "datasets": "cyan",
    "jobs": "magenta",
    "forecasts": "blue",
    "plans": "yellow",
    "assignments": "green",
    "runs": "bright_green",
    "agents": "dim",
    "clock": "dim",
}


def summarize(subject: str, payload: dict) -> str:
    """One line per event: the fields a person reads first."""
    keys = (
        "code",
        "message",
        "study_id",
        "job_id",
        "region",
        "datacenter",
        "action",
        "step",
        "reason",
        "expected_emissions_g",
        "hour",
    )
    parts = [f"{k}={payload[k]}" for k in keys if payload.get(k) not in (None, "", [])]
    return " ".join(parts)[:200]


class StudyFilter:
    """Keeps the events of one study: those naming it, and those of its jobs (a job's events carry
    only its ``job_id``; the job belongs to the study whose ``JobRequested`` named it)."""

    def __init__(self, study: str | None) -> None:
        self.study = study
        self.jobs: set[str] = set()

    def __call__(self, payload: dict) -> bool:
        if self.study is None:
            return True
        if (
            str(payload.get("study_id")) == self.study
            or payload.get("correlation_id") == self.study
        ):
            if payload.get("job_id"):
                self.jobs.add(str(payload["job_id"]))
            return True
        return str(payload.get("job_id")) in self.jobs or payload.get("correlation_id") in self.jobs


@dataclass
class EventFilter:
    """Which events are printed: those of the kinds asked for (``--kind``; the hourly forecasts
    only when asked for), on no hidden subject (``--hide``), of the study asked for (``--study``)."""

    kinds: list[str]
    hide: list[str]
    forecasts: bool
    study: StudyFilter

    def __call__(self, subject_name: str, payload: dict) -> bool:
        family = _kind(subject_name)
        if self.kinds and family not in self.kinds:
            return False
        if family == "forecasts" and not self.forecasts:
            return False
        hidden = any(subject_name.startswith(prefix) for prefix in self.hide)
        return not hidden and self.study(payload)  # the study's filter learns its jobs here


def events(
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events"),
    last: int = typer.Option(
        20, min=0, help="Events of history to show first (counted after the filters)"
    ),
    subject: str = typer.Option("metatune.>", help="Subject filter"),
    study: str | None = typer.Option(
        None,
        "--study",
        help="Only this study's events (its jobs' events included): its id, or a unique prefix",
    ),
    status_stream: bool = typer.Option(
        False, "--status", help="Tail heartbeats and clock ticks instead"
    ),
    raw: bool = typer.Option(False, "--json", help="Print each event as JSON"),
    hide: list[str] = typer.Option(
        [], "--hide", help="Subject prefix to leave out, e.g. metatune.plans (repeatable)"
    ),
    kind: list[str] = typer.Option(
        [],
        "--kind",
        help=KIND_HELP,
    ),
    forecasts: bool = typer.Option(
        False, "--forecasts", help="Include the hourly carbon forecasts (left out by default)"
    ),
    wide: bool = WIDE_FLAG,
) -> None:
    """Tail the event log (stream METATUNE), newest last. The hourly forecasts are left out
    unless asked for (--forecasts, --kind forecasts or a forecasts --subject)."""
    unknown = [k for k in kind if k not in KINDS]
    if unknown:
        raise fail(f"unknown --kind {', '.join(unknown)}: the kinds are {', '.join(KINDS)}")
    settings = get_settings()
    stream = settings.status_stream_name if status_stream else settings.stream_name
    if study is not None:  # a prefix names one study, as everywhere else
        with client(settings) as metatune:
            study = str(metatune.study_id(study))
    wanted = EventFilter(
        kinds=kind,
        hide=hide,
        forecasts=forecasts or "forecasts" in kind or subject.startswith(f"{FORECASTS_PREFIX}."),
        study=StudyFilter(study),
    )
    tail = Tail(stream, subject, wanted, last=last, raw=raw, wide=wide)
    try:
        asyncio.run(tail.run(settings, follow=follow))
    except BusUnavailable as exc:
        raise unavailable(exc) from None
    except KeyboardInterrupt:
        pass


@dataclass
class Tail:
    """Reads a stream's events on ``subject`` from its start: prints the ``last`` of those
    ``wanted`` once caught up, then (following) each new one as it comes."""

    stream: str
    subject: str
    wanted: EventFilter
    last: int
    raw: bool
    wide: bool

    async def run(self, settings: Settings, *, follow: bool) -> None:
        async with bus(settings) as nc:
            js = nc.jetstream()
            info = await js.stream_info(self.stream)
            sub = await js.subscribe(
                subjects.every_tenant(self.subject),  # metatune.datasets.submitted: every tenant's
                stream=self.stream,
                ordered_consumer=True,
                config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
            )
            history = await self.history(sub, caught_up=info.state.messages == 0)
            if self.last and history:
                _print(history, self.raw, self.wide)
            while follow:
                msg = await sub.next_msg(timeout=None)
                payload = _decode(msg.data)
                if self.wanted(msg.subject, payload):
                    header = not (self.last and history)
                    _print([(msg.subject, payload)], self.raw, self.wide, header=header)

    async def history(
        self, sub: JetStreamContext.PushSubscription, *, caught_up: bool
    ) -> list[tuple[str, dict]]:
        """The wanted events the stream holds, the last ``last`` of them (every one for 0): the
        filters apply before counting."""
        history: deque[tuple[str, dict]] = deque(maxlen=max(self.last, 0) or None)
        while not caught_up:
            try:
                msg = await sub.next_msg(timeout=2.0)
            except TimeoutError:
                break
            payload = _decode(msg.data)
            if self.wanted(msg.subject, payload):
                history.append((msg.subject, payload))
            caught_up = msg.metadata.num_pending == 0
        return list(history)


def _kind(subject: str) -> str:
    """``metatune.runs.fra1.completed`` -> ``runs``."""
    parts = subject.split(".")
    return parts[1] if len(parts) > 1 else ""


def _decode(data: bytes) -> dict:
    try:
        payload = json.loads(data)
    except ValueError:
        return {"raw": data[:200].decode(errors="replace")}
    return payload if isinstance(payload, dict) else {"value": payload}


def _row(subject: str, payload: dict) -> list[Cell]:
    """An event as a table row: (compact, wide) cells. The payload's text is anyone's: printed as
    text (no markup), escaped where a terminal cannot show it (a lone surrogate) or would obey it
    (a control character)."""
    when = printable(str(payload.get("occurred_at", ""))[:19].replace("T", " "))
    style = _STYLE.get(_kind(subject), "white")
    shown = [escape(subject.removeprefix("metatune.")), escape(subject)]
    what = printable(summarize(subject, payload))
    return [
        (escape(when[5:]), escape(when)),  # the year in the wide layout only; no microseconds
        (f"[{style}]{shown[0]}[/{style}]", f"[{style}]{shown[1]}[/{style}]"),
        (escape(UUID.sub(r"\1", what)), escape(what)),
    ]


def _print(events: list[tuple[str, dict]], raw: bool, wide: bool, header: bool = True) -> None:
    if not raw:
        rows = [_row(subject, payload) for subject, payload in events]
        render(console, COLUMNS, rows, wide=wide, header=header)
        return
    for subject, payload in events:
        record = {**payload, "subject": subject}  # the subject it was published on
        if "subject" in payload:  # an error's own field: the subject of what caused it
            record["cause_subject"] = payload["subject"]
        print(json.dumps(record), flush=True)  # --follow into a pipe: each event as it comes

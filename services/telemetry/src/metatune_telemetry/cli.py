"""CLI commands telemetry contributes: ``metatune report``, ``metatune webhooks list|retry|secret|rotate|endpoints``,
``metatune telemetry verify|migrate|export-mlflow``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from metatune.errors import BusUnavailable, DatabaseUnavailable
from metatune.redaction import redact_url
from metatune_cli.cli.connect import EXIT_NOT_FOUND, bus, fail, unavailable
from metatune_cli.cli.output import JSON_HELP, print_json
from metatune_cli.tables import WIDE_HELP, Column, render

from .settings import TelemetrySettings

if TYPE_CHECKING:
    from .adapters.db import Database

console = Console()


T = TypeVar("T")


def _run(main: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; a database or bus that does not answer is one line, exit 3."""
    # the NATS client only when a command runs: `metatune --help` imports this module
    from nats.js.errors import NotFoundError

    try:
        return asyncio.run(main)
    except (DatabaseUnavailable, BusUnavailable) as exc:
        raise unavailable(exc) from None
    except NotFoundError as exc:  # JetStream answers, the stream does not exist
        raise fail(
            f"not on this NATS: {exc.description} (run `metatune bus-init`)", code=EXIT_NOT_FOUND
        ) from None


def _db() -> Database:
    from .adapters.db import Database

    s = TelemetrySettings()
    return Database(s.database_url, connect_timeout_s=s.connect_timeout_s)


def report(
    study: Annotated[str, typer.Argument(help="study id (or a unique prefix)")],
    format: Annotated[
        Literal["md", "json", "csv"], typer.Option("--format", "-f", help="-f json: as --json")
    ] = "md",
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """The emissions disclosure of a study and each of its runs."""
    from metatune.display import trial_label

    from .disclosure.adapters.queries import find_study, study_disclosure
    from .disclosure.domain.formats import run_rows, to_csv, to_markdown

    async def main():
        db = _db()
        try:
            study_id = await find_study(db, study)
            if study_id is None:
                raise fail(f"no single study matches {study!r}", code=EXIT_NOT_FOUND)
            return await study_disclosure(db, study_id, TelemetrySettings().registry())
        finally:
            await db.close()

    disclosure = _run(main())
    if as_json or format == "json":
        typer.echo(disclosure.model_dump_json(indent=2))
    elif format == "csv":
        typer.echo(to_csv(disclosure), nl=False)
    elif console.is_terminal:
        for run in disclosure.runs:
            title = f"trial {trial_label(run.trial_index)} ({str(run.job_id)[:8]}), {run.outcome}"
            table = Table(title=title)
            table.add_column("Component")
            table.add_column("Disclosed data")
            for k, v in run_rows(run):
                table.add_row(k, v)
            console.print(table)
        console.print(to_markdown(disclosure).split("\n\n", 2)[1])
        if disclosure.deadline is not None and disclosure.deadline_outcome:
            console.print(
                f"deadline {disclosure.deadline:%Y-%m-%d %H:%M} UTC: {disclosure.deadline_outcome}",
                highlight=False,
            )
    else:
        typer.echo(to_markdown(disclosure))


webhooks_app = typer.Typer(
    help="The webhook outbox: list deliveries, retry dead ones, show and rotate signing secrets.",
    no_args_is_help=True,
)


@webhooks_app.command("list")
def webhooks_list(
    state: Annotated[str | None, typer.Option(help="pending, sending, delivered or dead")] = None,
    limit: Annotated[int, typer.Option(help="the latest this many")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    wide: Annotated[bool, typer.Option("--wide", help=WIDE_HELP)] = False,
) -> None:
    """Latest notifications in the outbox (URLs without credentials)."""
    from .webhooks.adapters.outbox import list_outbox

    async def main():
        db = _db()
        try:
            return await list_outbox(db, state, limit)
        finally:
            await db.close()

    rows = _run(main())
    if as_json:
        typer.echo(json.dumps(rows, default=str, indent=2))
        return
    if not rows:
        console.print(f"no {state} notifications in the outbox" if state else "the outbox is empty")
        return
    render(console, OUTBOX_COLUMNS, [_outbox_row(r) for r in rows], wide=wide)


OUTBOX_COLUMNS = (
    Column("id", justify="right"),
    Column("type", no_wrap=True),
    Column("state"),
    Column("attempts", justify="right", compact_header="tries"),
    Column("next attempt", compact_header="next"),
    Column("url"),
    Column("last", wide_only=True),
)


def _outbox_row(r: dict[str, Any]) -> list[str]:
    """A notification: its next attempt (none once delivered or dead) to the second, in UTC."""
    pending = r["state"] not in ("delivered", "dead")
    return [
        str(r["id"]),
        r["event_type"],
        r["state"],
        str(r["attempts"]),
        f"{r['next_attempt_at']:%m-%d %H:%M:%S}" if pending else "-",
        escape(r["url"]),
        escape(r["last_error"] or (str(r["last_status"]) if r["last_status"] else "-")),
    ]


@webhooks_app.command("retry")
def webhooks_retry(
    ids: Annotated[list[int] | None, typer.Argument(help="outbox ids to send again")] = None,
    all_dead: Annotated[bool, typer.Option("--all-dead", help="every dead notification")] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Queue notifications again with a fresh attempt budget."""
    from .webhooks.adapters.outbox import retry

    if not ids and not all_dead:
        raise typer.BadParameter("give outbox ids or --all-dead")

    async def main():
        db = _db()
        try:
            return await retry(db, ids, all_dead=all_dead)
        finally:
            await db.close()

    queued = _run(main())
    if as_json:
        print_json({"queued": queued})
    else:
        typer.echo(f"{queued} notification(s) queued again")


@webhooks_app.command("secret")
def webhooks_secret() -> None:
    """The whsec_ signing secret receivers verify with (keep it secret)."""
    from .webhooks.adapters.outbox import signing_secret

    async def main():
        db = _db()
        try:
            await db.migrate()
            return await signing_secret(db, TelemetrySettings().webhook_secret)
        finally:
            await db.close()

    typer.echo(_run(main()))


@webhooks_app.command("rotate")
def webhooks_rotate(
    url: Annotated[
        str, typer.Argument(help="the receiver's webhook URL (credentials are ignored)")
    ],
    overlap_hours: Annotated[
        float, typer.Option(min=0, help="hours the secrets before keep signing beside the new one")
    ] = 24.0,
) -> None:
    """Give an endpoint a new whsec_ secret (printed once: keep it secret); until the overlap
    ends, deliveries carry a signature by the old secret and one by the new."""
    from .webhooks.adapters.endpoint_secrets import rotate

    async def main():
        db = _db()
        try:
            await db.migrate()
            return await rotate(db, url, overlap_hours * 3600)
        finally:
            await db.close()

    typer.echo(_run(main()))


@webhooks_app.command("endpoints")
def webhooks_endpoints(
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Endpoints with secrets of their own: when each was made and retires (never the secrets)."""
    from .webhooks.adapters.endpoint_secrets import list_endpoints

    async def main():
        db = _db()
        try:
            return await list_endpoints(db)
        finally:
            await db.close()

    rows = _run(main())
    if as_json:
        typer.echo(json.dumps(rows, default=str, indent=2))
        return
    table = Table()
    for col in ("endpoint", "secret", "made", "retires", "live"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["endpoint"],
            "default" if r["default_secret"] else "own",
            f"{r['created_at']:%Y-%m-%d %H:%M:%S}",
            f"{r['retires_at']:%Y-%m-%d %H:%M:%S}" if r["retires_at"] else "",
            "yes" if r["live"] else "no",
        )
    console.print(table)


@webhooks_app.command("public-key")
def webhooks_public_key() -> None:
    """Telemetry's public key (not secret): submitters elsewhere set METATUNE_WEBHOOK_PUBLIC_KEY
    to it, so a webhook URL's credentials leave sealed for telemetry alone."""
    from metatune.webhook_seal import own_public_key

    typer.echo(own_public_key(TelemetrySettings()))


telemetry_app = typer.Typer(
    help="Telemetry storage: consistency check, migrations, export to MLflow.", no_args_is_help=True
)


@telemetry_app.command("verify")
def telemetry_verify(
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Compare the JetStream streams with the database; exit 1 when a message is missing."""

    from .ingest.adapters.verify import verify

    s = TelemetrySettings()

    async def main():
        async with bus(s, "telemetry") as nc:
            db = _db()
            try:
                return await verify(nc.jetstream(), db, [s.stream_name, s.status_stream_name])
            finally:
                await db.close()

    checks = _run(main())
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "stream": c.stream,
                        "messages": c.messages,
                        "stored": c.stored,
                        "rejected": c.rejected,
                        "gap": c.gap,
                        "missing": c.missing[:100],
                    }
                    for c in checks
                ]
            )
        )
    else:
        table = Table(title=f"stream vs {redact_url(s.database_url)}")
        for col in ("stream", "messages", "stored", "rejected", "gap"):
            table.add_column(col, justify="right")
        for c in checks:
            table.add_row(c.stream, str(c.messages), str(c.stored), str(c.rejected), str(c.gap))
        console.print(table)
        for c in checks:
            for seq, subject in c.missing[:20]:
                console.print(f"missing: {c.stream} #{seq} {subject}")
    if any(c.gap for c in checks):
        raise typer.Exit(1)


@telemetry_app.command("migrate")
def telemetry_migrate() -> None:
    """Apply the telemetry migrations not yet applied (the service does it at start too)."""

    async def main():
        db = _db()
        try:
            return await db.migrate(), db.mode
        finally:
            await db.close()

    applied, mode = _run(main())
    typer.echo(f"mode {mode}; applied: {', '.join(applied) or 'nothing (up to date)'}")


@telemetry_app.command("export-mlflow")
def telemetry_export_mlflow(
    study: Annotated[str, typer.Argument(help="study id (or a unique prefix)")],
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            help="MLflow tracking URI, passed to MLflow as it is (http://host:5000, "
            "sqlite:////abs/mlflow.db); default METATUNE_MLFLOW_TRACKING_URI",
        ),
    ] = None,
    artifact_location: Annotated[
        str | None,
        typer.Option(
            "--artifact-location",
            help="Where a new experiment keeps its artifacts (a folder or an object store URI); "
            "default METATUNE_MLFLOW_ARTIFACT_LOCATION, else beside a SQLite store "
            "(mlartifacts/<study>) or where a tracking server decides",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Export the study's finished trials to MLflow: one experiment, one run per trial (params,
    per-step metrics, energy and emissions, the adapter); a trial exported before is not again."""
    from contextlib import AsyncExitStack
    from pathlib import Path

    from metatune.bus import ADAPTERS_BUCKET, ObjectStore

    from .disclosure.adapters.queries import find_study
    from .exports.adapters.mlflow_export import ExportSummary, MlflowExportError, export_study

    s = TelemetrySettings()
    uri = tracking_uri or s.mlflow_tracking_uri
    if not uri:
        raise fail("give --tracking-uri or set METATUNE_MLFLOW_TRACKING_URI")

    async def main() -> ExportSummary:
        async with AsyncExitStack() as stack:
            db = _db()
            stack.push_async_callback(db.close)
            study_id = await find_study(db, study)
            if study_id is None:
                raise fail(f"no single study matches {study!r}", code=EXIT_NOT_FOUND)
            stores: list[ObjectStore] = []

            async def fetch(key: str, path: Path) -> None:  # the bus only for a study with adapters
                if not stores:
                    nc = await stack.enter_async_context(bus(s))  # as `adapter download`
                    stores.append(ObjectStore(nc.jetstream()))
                await stores[0].get_to_file(ADAPTERS_BUCKET, key, path)

            return await export_study(
                db, study_id, uri, fetch, artifact_location or s.mlflow_artifact_location
            )

    try:
        summary = _run(main())
    except MlflowExportError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(summary.model_dump(mode="json"))
        return
    missing = f"; adapters not in the object store: {', '.join(summary.adapters_missing)}"
    typer.echo(
        f"experiment {summary.experiment!r} (id {summary.experiment_id}) at "
        f"{summary.tracking_uri} (artifacts at {summary.artifact_location}): "
        f"{summary.runs_created} run(s) exported, "
        f"{summary.runs_existing} already there" + (missing if summary.adapters_missing else "")
    )

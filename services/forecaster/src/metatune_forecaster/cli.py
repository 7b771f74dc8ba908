"""``metatune forecaster backfill|import-csv``: fill the forecaster's observation store ahead of
its first live forecast (contributed through the ``metatune.cli`` entry points)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from metatune.errors import ConfigurationError, DatabaseUnavailable
from metatune.redaction import redact
from metatune.settings import Settings
from metatune_cli.cli.connect import EXIT_BAD_INPUT, EXIT_UNAVAILABLE, fail
from metatune_cli.cli.output import JSON_HELP, logs_to_stderr, print_json

from .settings import ForecasterSettings

if TYPE_CHECKING:  # the registry imports every contract (and numpy): only the commands need it
    from metatune.contracts import CarbonForecast
    from metatune.registry import Registry

    from .adapters.live import LiveSource

console = Console()
forecaster_app = typer.Typer(
    help="The carbon-intensity forecaster: one forecast now, its store of observed intensity "
    "(backfill, CSV import).",
    no_args_is_help=True,
)


def _store(settings: Settings):
    from .adapters.store import ObservationStore

    return ObservationStore(settings.database_url, connect_timeout_s=settings.connect_timeout_s)


def _no_database(exc: DatabaseUnavailable) -> typer.Exit:
    """The observation store lives in PostgreSQL: one line saying how to get one."""
    return fail(
        f"{exc}; start one with `metatune up` (an embedded PostgreSQL when none answers) or set "
        "METATUNE_DATABASE_URL to yours",
        code=EXIT_UNAVAILABLE,
    )


def _registry(settings: Settings) -> Registry:
    return settings.registry()


def _region_source(settings: ForecasterSettings, region: str) -> dict[str, LiveSource]:
    """``region``'s intensity source as its registry entry names it (the replay included), or one
    error line: a region the registry lacks, a source that cannot be built (no key)."""
    from .adapters.live import region_sources

    try:
        sources = region_sources(_registry(settings), settings, include_replay=True, only=region)
    except ConfigurationError as exc:
        raise fail(str(exc)) from exc
    if region not in sources:
        known = ", ".join(_registry(settings).regions())
        raise fail(f"region {region!r} is not in the datacenter registry; known: {known}")
    return sources


def _current_hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _hour(text: str, option: str) -> datetime:
    """A date or ISO time (naive means UTC) on the hour."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise fail(f"{option} {text!r}: not a date (YYYY-MM-DD) or ISO time") from exc
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.replace(minute=0, second=0, microsecond=0)


@forecaster_app.command()
def backfill(
    region: Annotated[str, typer.Option("--region", help="grid region of the datacenter registry")],
    from_: Annotated[str, typer.Option("--from", help="first day (YYYY-MM-DD, UTC) or ISO time")],
    to: Annotated[
        str | None, typer.Option("--to", help="end, exclusive (default: the current hour)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Store a region's observed hourly intensity from its registry source; hours already stored
    are skipped, so an interrupted backfill resumes where it stopped."""
    # pandas, like the adapters, only when a command runs: `metatune --help` imports this module
    from .adapters.live import backfill as run_backfill
    from .domain.providers import ProviderUnavailable

    settings = ForecasterSettings()
    start = _hour(from_, "--from")
    end = _hour(to, "--to") if to else _current_hour()
    if end <= start:
        raise fail(f"--to {end:%Y-%m-%dT%H:%MZ} is not after --from {start:%Y-%m-%dT%H:%MZ}")
    live = _region_source(settings, region)[region]

    async def main():
        async with _store(settings) as store:
            await store.ready()  # a database that does not answer: one line, before the bar
            with (
                logs_to_stderr(console, as_json),
                Progress(
                    TextColumn(f"{region} ({live.zone}, {live.source.name})"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn("hours"),
                    TimeRemainingColumn(),
                    console=console,
                    transient=as_json,
                ) as bar,
            ):
                task = bar.add_task("backfill", total=None)

                def progress(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                return await run_backfill(store, live, start, end, progress)

    try:
        report = asyncio.run(main())
    except DatabaseUnavailable as exc:
        raise _no_database(exc) from exc
    except (ProviderUnavailable, ValueError) as exc:
        raise fail(
            f"backfill of {region} stopped: {redact(str(exc))} (what was stored is kept; run it "
            "again to resume)",
            1,
        ) from exc
    summary = {
        "region": region,
        "zone": report.zone,
        "source": report.source,
        "from": start.isoformat(),
        "to": end.isoformat(),
        "hours": report.hours,
        "stored_before": report.stored_before,
        "new": report.stored.new,
        "revised": report.stored.changed,
        "lacking": report.lacking,
    }
    if as_json:
        print_json(summary)
        return
    console.print(
        f"{region}: {report.hours} hours from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC; "
        f"{report.stored_before} were stored, {report.stored.new} added from {report.source}"
        + (f", {report.lacking} the provider has no value for" if report.lacking else "")
    )


SHOWN_LEADS = (0, 1, 2, 3, 6, 12, 18, 24, 36, 48, 72, 96, 120, 144, 167)  # the table's hours


@forecaster_app.command()
def forecast(
    region: Annotated[str, typer.Option("--region", help="grid region of the datacenter registry")],
    at: Annotated[
        str | None, typer.Option("--at", help="issue hour, ISO time (default: the current hour)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="the CarbonForecast as JSON")] = False,
) -> None:
    """One forecasting round now for one region, as the service makes it: history from the
    observation store (the hours it lacks fetched from the region's source and stored), weather
    from METATUNE_FORECASTER_WEATHER; prints the 168-hour forecast's summary."""
    from .adapters.live import LiveIntensity
    from .adapters.runtime import region_sites
    from .app import region_forecaster, replay_data

    settings = ForecasterSettings()
    hour = _hour(at, "--at") if at else _current_hour()
    sources = _region_source(settings, region)
    site = region_sites(_registry(settings))[region]

    async def main():
        async with _store(settings) as store:
            await store.ready()  # a database that does not answer: one line, before the model
            data = replay_data(settings)
            intensity = LiveIntensity(store, sources)
            (outcome,) = await region_forecaster(settings, data, [site], intensity).round(
                hour, datetime.now(UTC)
            )
            return outcome

    try:
        with logs_to_stderr(console, as_json):
            outcome = asyncio.run(main())
    except DatabaseUnavailable as exc:
        raise _no_database(exc) from exc
    if outcome.forecast is None:
        code = EXIT_BAD_INPUT if outcome.code == "source_misconfigured" else EXIT_UNAVAILABLE
        raise fail(f"{region} at {hour:%Y-%m-%dT%H:%MZ}: {redact(str(outcome.failure))}", code)
    if as_json:
        print_json(outcome.forecast.model_dump(mode="json"))
        return
    _print_forecast(outcome.forecast)


def _print_forecast(forecast: CarbonForecast) -> None:
    from rich.table import Table

    from metatune.contracts.forecasts import HORIZON_HOURS

    flags = [f"{forecast.history_hours} history hours"]
    if forecast.short_history:
        flags.append("short history")
    if len(forecast.imputed_hours) == HORIZON_HOURS:
        flags.append("no weather: from history alone")
    elif forecast.imputed_hours:
        flags.append(f"{len(forecast.imputed_hours)} hours of imputed weather")
    if forecast.provider_hours:
        flags.append(f"{forecast.provider_hours} hours blended with the provider's forecast")
    console.print(
        f"{forecast.region}: issued {forecast.issued_at:%Y-%m-%d %H:%M} UTC by model "
        f"{forecast.model_version}, {forecast.source} ({forecast.signal}, "
        f"{forecast.emission_factors} factors), " + ", ".join(flags),
        soft_wrap=True,  # one line, however narrow the terminal: the flags are read as phrases
    )
    table = Table("hour (UTC)", "lead", "p10", "p50", "p90", title="gCO2eq/kWh")
    for lead in SHOWN_LEADS:
        table.add_row(
            f"{forecast.start + timedelta(hours=lead):%Y-%m-%d %H:%M}",
            f"+{lead} h",
            f"{forecast.p10_g_per_kwh[lead]:.1f}",
            f"{forecast.g_per_kwh[lead]:.1f}",
            f"{forecast.p90_g_per_kwh[lead]:.1f}",
        )
    console.print(table)


@forecaster_app.command("import-csv")
def import_csv(
    file: Annotated[
        Path, typer.Argument(help="Electricity Maps hourly CSV export (.csv or .csv.gz)")
    ],
    zone: Annotated[str, typer.Option("--zone", help="the zone id the file holds (e.g. DE)")],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Import an Electricity Maps hourly export (its data portal's yearly files) into the
    observation store as the zone's average intensity; re-importing a file changes nothing."""
    from .adapters.em_csv import SOURCE, read_export
    from .domain.observations import HOUR, hours_between
    from .domain.providers import Signal

    try:
        export = read_export(file)
    except ValueError as exc:
        raise fail(str(exc)) from exc
    if export.zone is not None and export.zone != zone:
        raise fail(f"{file} holds zone {export.zone}, not {zone}")
    settings = ForecasterSettings()

    async def main():
        async with _store(settings) as store:
            await store.ready()
            return await store.upsert(zone, Signal.average, SOURCE, export.intensity)

    try:
        stored = asyncio.run(main())
    except DatabaseUnavailable as exc:
        raise _no_database(exc) from exc
    series = export.intensity
    first = series.index[0] if len(series) else None
    last = series.index[-1] if len(series) else None
    gaps = 0 if first is None else len(hours_between(first, last + HOUR)) - len(series)
    summary = {
        "zone": zone,
        "file": str(file),
        "hours": len(series),
        "first": first.isoformat() if first is not None else None,
        "last": last.isoformat() if last is not None else None,
        "new": stored.new,
        "revised": stored.changed,
        "unchanged": len(series) - stored.new - stored.changed,
        "missing_hours": gaps,
    }
    if as_json:
        print_json(summary)
        return
    console.print(
        f"{zone}: {len(series)} hours read from {file.name}"
        + (f" ({first:%Y-%m-%d} .. {last:%Y-%m-%d})" if first is not None else "")
        + f"; {stored.new} new, {stored.changed} revised, {summary['unchanged']} already stored"
        + (f"; {gaps} hours missing in the file" if gaps else "")
    )

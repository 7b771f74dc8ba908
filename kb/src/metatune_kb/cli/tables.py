"""``metatune kb import|portfolio|stats``: what the knowledge base holds, its portfolio, loading it.

Each command is a ``metatune.cli.kb`` entry point of this package (the CLI's ``kb`` group lists
them without importing this module); the store, the public tables and the portfolio are imported
when a command runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from metatune.redaction import redact
from metatune_cli.cli.connect import EXIT_UNAVAILABLE, err_console, fail
from metatune_cli.cli.output import JSON_HELP, WIDE_FLAG, print_json
from metatune_cli.tables import Cell, Column, render

if TYPE_CHECKING:
    from metatune.knowledge.stats import KbStats
    from metatune.knowledge.store import ImportReport

IMPORT_COLUMNS = (
    Column("file / table"),
    Column("runs", justify="right"),
    Column("added", justify="right"),
    Column("already there", justify="right", compact_header="there"),
)
PORTFOLIO_COLUMNS = (
    Column("#", justify="right"),
    Column("configuration"),
    Column("mean score", justify="right", compact_header="mean"),
    Column("portfolio score", justify="right", compact_header="portfolio"),
    Column("datasets", justify="right", wide_only=True),
)
SUMMARY_COLUMNS = (Column("", no_wrap=True), Column(""))
SOURCE_COLUMNS = (
    Column("source"),
    Column("runs", justify="right"),
    Column("datasets", justify="right"),
)
QUALITY_COLUMNS = (
    Column("dataset"),
    Column("runs", justify="right"),
    Column("configs", justify="right", wide_only=True),
    Column("majority", justify="right", wide_only=True),
    Column("beat it", justify="right"),
    Column("best margin", justify="right", compact_header="margin"),
    Column("spread (std)", justify="right", compact_header="spread"),
    Column("seed std", justify="right"),
    Column("seed std <= spread/3", compact_header="quiet"),
)
LICENCE_HELP = (
    "keep only the runs of datasets whose recorded licence contains this (case-insensitive; "
    "repeatable: any of them), e.g. --licence 'CC BY' --licence CC0"
)
Licences = Annotated[list[str] | None, typer.Option(help=LICENCE_HELP)]
AsJson = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


def _store():
    from metatune.knowledge.store import KnowledgeStore
    from metatune.settings import get_settings

    settings = get_settings()
    return KnowledgeStore(settings.database_url, connect_timeout_s=settings.connect_timeout_s)


async def _import(
    file: Path | None, public: Path | None, licences: list[str]
) -> list[ImportReport]:
    from metatune.knowledge.store import ImportReport

    from ..adapters.public import import_public

    reports: list[ImportReport] = []
    async with _store() as store:
        await store.migrate()
        if file is not None:
            report = await store.import_file(file, licences)
            if report.torn:
                err_console().print(
                    f"[yellow]{file}: its last line was cut short and was skipped[/yellow]"
                )
            reports.append(report)
        if public is not None:
            imported = await asyncio.to_thread(import_public, public)
            by_table: dict[str, list] = {}
            for run in imported.runs:
                by_table.setdefault(run.provenance.source, []).append(run)
            for source, runs in by_table.items():
                added = await store.add_runs(runs)
                reports.append(
                    ImportReport(
                        name=source,
                        runs=len(runs),
                        added=added,
                        existed=len(runs) - added,
                        sources={source: len(runs)},
                    )
                )
    return reports


def import_(
    file: Annotated[
        Path | None, typer.Argument(help="knowledge-base file (.jsonl or .jsonl.gz)")
    ] = None,
    public: Annotated[
        Path | None,
        typer.Option(
            help="public HPO folder (nmt_hpo/, deberta_mnli/, peft_metamathqa/, tasks.csv)"
        ),
    ] = None,
    licence: Licences = None,
    as_json: AsJson = False,
    wide: bool = WIDE_FLAG,
) -> None:
    """Load a knowledge-base file, or the public HPO tables, into the configured database; each run
    once (by run id), so importing again adds nothing."""
    from metatune.errors import DatabaseUnavailable
    from metatune.knowledge.errors import KnowledgeBaseError

    if file is None and public is None:
        raise fail("give a knowledge-base FILE, or --public DIR")
    try:
        reports = asyncio.run(_import(file, public, licence or []))
    except DatabaseUnavailable as exc:
        raise fail(redact(str(exc)), code=EXIT_UNAVAILABLE) from exc
    except KnowledgeBaseError as exc:
        raise fail(redact(str(exc))) from exc
    if as_json:
        print_json({"reports": reports})
        return
    rows = [[escape(r.name), str(r.runs), str(r.added), str(r.existed)] for r in reports]
    render(Console(), IMPORT_COLUMNS, rows, wide=wide)


def portfolio(
    kb: Annotated[Path, typer.Option(help="knowledge-base file (.jsonl or .jsonl.gz)")],
    k: Annotated[int, typer.Option(min=1, help="configurations in the portfolio")] = 5,
    licence: Licences = None,
    as_json: AsJson = False,
    wide: bool = WIDE_FLAG,
) -> None:
    """The configurations that do well across the file's datasets, chosen greedily so that they
    complement one another: the cold-start portfolio and, its first entry, the trainer's defaults."""
    from metatune.knowledge.errors import KnowledgeBaseError
    from metatune.knowledge.files import read_kb_file
    from metatune.knowledge.records import under_licences

    from ..domain.portfolio import greedy_portfolio

    try:
        runs = read_kb_file(kb).runs
    except (KnowledgeBaseError, OSError) as exc:
        raise fail(str(exc)) from exc
    if licence:
        runs = under_licences(runs, licence)
    entries = greedy_portfolio(runs, k)
    if as_json:
        print_json({"kb": kb.name, "runs": len(runs), "portfolio": [vars(e) for e in entries]})
        return
    rows: list[list[Cell]] = [
        [
            str(i),
            (  # the settings a configuration sets; every one in the wide layout
                escape(", ".join(f"{k}={v}" for k, v in entry.config.items() if v is not None)),
                escape(", ".join(f"{k}={v}" for k, v in entry.config.items())),
            ),
            f"{entry.mean_score:.3f}",
            f"{entry.portfolio_score:.3f}",
            str(entry.datasets),
        ]
        for i, entry in enumerate(entries, 1)
    ]
    render(Console(), PORTFOLIO_COLUMNS, rows, wide=wide)


async def _stats():
    async with _store() as store:
        await store.migrate()
        return await store.stats()


def stats(
    kb: Annotated[
        Path | None,
        typer.Option(help="a knowledge-base file to describe instead of the database"),
    ] = None,
    licence: Annotated[list[str] | None, typer.Option(help=f"with --kb: {LICENCE_HELP}")] = None,
    as_json: AsJson = False,
    wide: bool = WIDE_FLAG,
) -> None:
    """What the knowledge base holds: runs, datasets, configurations per dataset, sources, and how
    many datasets' best run beats the majority-class baseline; per dataset, the share of runs that
    beat it and the noise between seeds against the spread between configurations."""
    from metatune.errors import DatabaseUnavailable
    from metatune.knowledge.errors import KnowledgeBaseError
    from metatune.knowledge.files import read_kb_file
    from metatune.knowledge.records import under_licences
    from metatune.knowledge.stats import file_stats

    if licence and kb is None:
        raise fail("--licence filters a file: give --kb FILE")
    try:
        if kb is not None:
            in_file = read_kb_file(kb).runs
            summary = file_stats(under_licences(in_file, licence) if licence else in_file)
        else:
            summary = asyncio.run(_stats())
    except DatabaseUnavailable as exc:
        raise fail(redact(str(exc)), code=EXIT_UNAVAILABLE) from exc
    except (KnowledgeBaseError, OSError) as exc:
        raise fail(redact(str(exc))) from exc
    if as_json:
        typer.echo(summary.model_dump_json())
        return
    console = Console()
    render(
        console,
        SUMMARY_COLUMNS,
        _summary_rows(summary),
        wide=wide,
        title="knowledge base",
        header=False,
    )
    sources = [
        [escape(source), str(runs), str(summary.datasets_per_source.get(source, 0))]
        for source, runs in summary.runs_per_source.items()
    ]
    render(console, SOURCE_COLUMNS, sources, wide=wide, title="by source")
    if summary.per_dataset:
        render(
            console,
            QUALITY_COLUMNS,
            _quality_rows(summary),
            wide=wide,
            title="per dataset",
        )
        console.print(  # a line of its own: a table's caption wraps at the table's width
            f"quiet: seed noise within a third of the spread on "
            f"{summary.datasets_noise_within_spread} of {summary.datasets_noise_measured} measured",
            highlight=False,
        )


def _summary_rows(summary: KbStats) -> list[list[str]]:
    rows = [
        [
            "runs",
            f"{summary.runs} ({summary.runs_completed} completed, {summary.runs_early_stopped} "
            f"early-stopped, {summary.runs_failed} failed)",
        ],
        ["datasets", str(summary.datasets)],
        [
            "configurations per dataset",
            f"min {summary.configs_per_dataset_min}, median "
            f"{summary.configs_per_dataset_median:g}, max {summary.configs_per_dataset_max}",
        ],
        ["base models", str(summary.base_models)],
        [
            "study profiles",
            f"{summary.study_profiles} ({summary.runs_profile_missing} runs await one)",
        ],
    ]
    if summary.datasets_with_majority_baseline:
        rows.append(
            [
                "best run beats the majority class",
                f"{summary.datasets_beating_majority_baseline} of "
                f"{summary.datasets_with_majority_baseline} datasets, median margin "
                f"{summary.median_margin_over_majority_baseline:+.3f}, worst "
                f"{summary.min_margin_over_majority_baseline:+.3f}",
            ]
        )
    if summary.repeated_configs:
        rows.append(
            [
                "noise between seeds",
                f"metric std median {summary.seed_noise_std_median:.3f}, max "
                f"{summary.seed_noise_std_max:.3f} over {summary.repeated_configs} repeated "
                "configurations",
            ]
        )
    return rows


def _quality_rows(summary: KbStats) -> list[list[str]]:
    """Per dataset: does it learn, and do its configurations differ beyond the noise between seeds?"""

    def figure(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    return [
        [
            escape(q.dataset),
            str(q.runs),
            str(q.configs),
            f"{q.majority_baseline:.3f}",
            f"{q.beats_baseline_share:.0%}",
            f"{q.best_margin:+.3f}",
            figure(q.config_spread),
            figure(q.seed_std) + (f" ({q.repeated_configs})" if q.repeated_configs else ""),
            {None: "-", True: "yes", False: "no"}[q.noise_within_spread],
        ]
        for q in summary.per_dataset
    ]

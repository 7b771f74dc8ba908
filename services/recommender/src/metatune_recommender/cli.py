"""``metatune recommend PROFILE.json``: the top-3 for a profiled dataset, with predictions and costs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from metatune.models import EMBEDDED_MODEL

if TYPE_CHECKING:  # imported where used: `metatune --help` stays quick
    from metatune.contracts import TrainingBudget
    from metatune.knowledge.records import KbRun


def _table(advice: dict) -> Table:
    table = Table(
        title=f"recommendations ({advice['source']}, history of {advice['base_model']}, "
        f"throughput measured on {advice['throughput_device']})"
    )
    for column in (
        "#",
        "rank",
        "alpha",
        "lr",
        "batch",
        "dropout",
        "warm-up",
        "schedule",
        "targets",
        "predicted (80 %)",
        "GPU-h",
        "energy Wh",
    ):
        table.add_column(column, justify="right")
    for i, rec in enumerate(advice["recommendations"], start=1):
        c = rec["config"]
        low_high = rec.get("interval")
        predicted = (
            "-"
            if rec["predicted"] is None
            else f"{rec['predicted']:.3f} ({low_high[0]:.2f}-{low_high[1]:.2f})"
            if low_high
            else f"{rec['predicted']:.3f} ± {rec['std']:.3f}"
        )
        table.add_row(
            str(i),
            str(c["rank"]),
            f"{c['alpha']:g}",
            f"{c['learning_rate']:.3g}",
            str(c["batch_size"]),
            f"{c['dropout']:.2f}",
            f"{c['warmup_ratio']:.2f}",
            c["lr_schedule"],
            ",".join(c["target_modules"] or ["default"]),
            predicted,
            f"{rec['estimated_gpu_hours']:.3g}",
            f"{rec['energy_wh']:.3g}",
        )
    return table


def recommend(
    profile: Annotated[
        Path, typer.Argument(help="PROFILE.json as printed by `metatune profile --json`")
    ],
    base_model: Annotated[str, typer.Option(help="the base model to fine-tune")] = EMBEDDED_MODEL,
    kb: Annotated[
        list[Path] | None,
        typer.Option(help="knowledge-base file, repeatable \\[default: every shipped seed]"),
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=50, help="how many configurations")] = 3,
    epochs: Annotated[
        float | None,
        typer.Option(min=0.001, max=1000, help="passes over the training rows \\[default: 3]"),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="optimizer steps per trial, instead of --epochs")
    ] = None,
    max_train_rows: Annotated[
        int | None,
        typer.Option(min=0, help="training rows a trial uses at most; 0: every \\[default: 1000]"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Recommend LoRA configurations for a profiled dataset from the knowledge base."""
    from metatune.settings import get_settings

    from .adapters.prior_cache import prior_cache
    from .domain.errors import RecommenderError
    from .domain.recommender import Recommender, profile_descriptors

    err = Console(stderr=True)
    budget = _budget(err, epochs, max_steps, max_train_rows)
    features = _profile_features(err, profile)
    runs = _runs(err, kb)
    try:
        recommender = Recommender(runs, store=prior_cache(get_settings()))
        advice = recommender.recommend(base_model, profile_descriptors(features), k, budget=budget)
    except RecommenderError as exc:
        err.print(f"[red]cannot recommend[/red]: {exc}")
        raise typer.Exit(2) from exc
    for warning in advice.warnings:
        err.print(f"[yellow]warning[/yellow]: {warning}")
    if advice.imputed:
        err.print(f"[yellow]imputed from the knowledge base[/yellow]: {', '.join(advice.imputed)}")
    if advice.error:
        err.print(f"[yellow]cold start[/yellow]: {advice.error}")
    if as_json:
        typer.echo(json.dumps(advice.as_dict(), indent=2))
        return
    out = Console()
    out.print(_table(advice.as_dict()))
    out.print(f"each trains {budget.describe()}", highlight=False)
    for i, rec in enumerate(advice.recommendations, start=1):
        if rec.reason:
            out.print(f"{i}: {rec.reason}", highlight=False)
    if advice.evidence:
        out.print(advice.evidence, highlight=False)


def _budget(
    err: Console, epochs: float | None, max_steps: int | None, max_train_rows: int | None
) -> TrainingBudget:
    """The study budget the flags give; an invalid one exits 2 with a one-line error."""
    from pydantic import ValidationError

    from metatune.contracts import TrainingBudget, validation_summary

    try:
        return TrainingBudget.model_validate(
            TrainingBudget.options(epochs, max_steps, max_train_rows)
        )
    except ValidationError as exc:
        err.print(f"[red]invalid budget[/red]: {validation_summary(exc)}")
        raise typer.Exit(2) from exc


def _profile_features(err: Console, profile: Path) -> dict[str, Any]:
    """The meta-features of ``profile`` (`metatune profile --json`'s object, or its features)."""
    try:
        data = json.loads(profile.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        err.print(f"[red]profile unreadable[/red]: {exc}")
        raise typer.Exit(2) from exc
    features = data.get("features", data) if isinstance(data, dict) else None
    if not isinstance(features, dict):
        err.print(
            "[red]profile unreadable[/red]: expected a JSON object (of `metatune profile --json`)"
        )
        raise typer.Exit(2)
    return features


def _runs(err: Console, kb: list[Path] | None) -> list[KbRun]:
    """The runs of the ``kb`` files, else of every shipped seed."""
    from metatune.knowledge.errors import KnowledgeBaseError
    from metatune.knowledge.files import read_kb_file

    from .adapters.seeds import seed_paths

    runs: list[KbRun] = []
    try:
        for path in kb or [p for p in seed_paths() if p.is_file()]:
            runs += read_kb_file(path).runs
    except KnowledgeBaseError as exc:
        err.print(f"[red]knowledge base unreadable[/red]: {exc}")
        raise typer.Exit(2) from exc
    return runs

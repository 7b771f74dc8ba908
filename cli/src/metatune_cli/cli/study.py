"""``metatune study list`` and ``metatune study show STUDY``: the studies as the event log tells them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer
from rich.console import Console

from metatune.contracts import TrainingBudget
from metatune.display import beside_baseline, prediction, trial_label

from ..tables import Column, render, short_id
from .calls import client
from .output import JSON_FLAG, STUDY_ARGUMENT, WIDE_FLAG, print_json

console = Console()
study_app = typer.Typer(
    help="Studies: what was submitted, profiled, requested, trained and stopped.",
    no_args_is_help=True,
)


LIST_COLUMNS = (
    Column("name"),
    Column("study"),
    Column("tags", wide_only=True),
    Column("submitted", wide_only=True),
    Column("dataset", wide_only=True),
    Column("model", wide_only=True),
    Column("trials", justify="right"),
    Column("done", justify="right"),
    Column("failed", justify="right"),
    Column("status"),
)


SHOW_COLUMNS = (
    Column("trial"),
    Column("status"),
    Column("predicted"),
    Column("result"),
    Column("rank", wide_only=True, justify="right"),
    Column("lr", wide_only=True, justify="right"),
    Column("job"),
)


@study_app.command("list")
def list_studies(
    tag: list[str] | None = typer.Option(
        None,
        "--tag",
        metavar="TAG",
        help="Only the studies filed under this tag (repeat: under every one)",
    ),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
    wide: bool = WIDE_FLAG,
) -> None:
    """Every study in the event log, oldest first."""
    wanted = set(tag or ())
    with client() as metatune:
        studies = [s.model_dump(mode="json") for s in metatune.studies(wanted)]
    if raw:
        print_json(studies)
        return
    rows = [
        [
            s["name"] or "-",
            short_id(s["study_id"]),
            ", ".join(s["tags"]) or "-",
            (s["submitted_at"] or "")[:16].replace("T", " "),
            s["dataset"] or "-",
            s["base_model"] or "-",
            f"{s['trials_requested']}/{s['trials_budget'] or '-'}",
            str(s["trials_completed"]),
            str(s["trials_failed"]),
            s["status"],
        ]
        for s in studies
    ]
    if studies:
        render(console, LIST_COLUMNS, rows, wide=wide)
    elif wanted:
        console.print(f"no studies tagged {', '.join(sorted(wanted))} in the event log")
    else:
        console.print("no studies in the event log")


def _result(trial: dict[str, Any]) -> str:
    """A trial's outcome as a person reads it: its accuracy beside the majority and chance baselines, the
    validation loss (or perplexity); the reason where it failed or never ran."""
    metrics = trial["metrics"]
    if not metrics:
        return trial["error"] or "-"
    parts = []
    if metrics.get("accuracy") is not None:
        shown = beside_baseline(
            metrics["accuracy"], trial["majority_baseline"], trial["chance_baseline"]
        )
        parts.append(f"accuracy {shown}")
    if metrics.get("macro_f1") is not None:
        parts.append(f"macro F1 {metrics['macro_f1']:.3f}")
    if metrics.get("perplexity") is not None:
        parts.append(f"perplexity {metrics['perplexity']:.2f}")
    if metrics.get("val_loss") is not None:
        parts.append(f"val loss {metrics['val_loss']:.3f}")
    return ", ".join(parts) or "-"


def deadline_line(details: dict[str, Any]) -> str:
    """``2026-03-02 12:00 UTC, met its deadline``, from a study's JSON (``study show``)."""
    if details["deadline"] is None:
        return "-"
    at = f"{datetime.fromisoformat(details['deadline']):%Y-%m-%d %H:%M %Z}"
    return f"{at}, {details.get('deadline_outcome') or 'no trial ended yet'}"


@study_app.command("show")
def show(
    study: str = STUDY_ARGUMENT,
    raw: bool = JSON_FLAG,
    wide: bool = WIDE_FLAG,
) -> None:
    """One study: submission, profile, each trial with its prediction and outcome, and why it stopped."""
    with client() as metatune:
        details = metatune.study(study).model_dump(mode="json")
    if raw:
        print_json(details)
        return
    title = f"{details['name']} ({details['study_id']})" if details["name"] else details["study_id"]
    console.print(f"[bold]study {title}[/bold]  {details['status']}", highlight=False)
    if details["tags"]:
        console.print(f"tags {', '.join(details['tags'])}", highlight=False)
    console.print(
        f"dataset {details['dataset']}  task {details['task']}  model {details['base_model']}",
        highlight=False,
    )
    console.print(f"deadline {deadline_line(details)}", highlight=False)
    if details["spec"]:
        budget = TrainingBudget.model_validate(details["spec"]["budget"])
        console.print(
            f"{details['spec']['trials']} trials, each {budget.describe()}", highlight=False
        )
    if details["profile"]:
        p = details["profile"]
        console.print(
            f"profile: {p['n_examples']} examples, {p['n_classes']} classes, {p['tokens_mean']:.1f} tokens "
            f"on average, {details['rows_skipped']} rows skipped",
            highlight=False,
        )
    rows = [
        [
            trial_label(t["trial_index"]),
            t["status"],
            prediction(
                t["predicted_metric"],
                t["predicted_metric_std"],
                t.get("predicted_metric_interval"),
            ),
            _result(t),
            str((t["config"] or {}).get("rank", "-")),
            str((t["config"] or {}).get("learning_rate", "-")),
            short_id(t["job_id"]),
        ]
        for t in details["trials"]
    ]
    render(console, SHOW_COLUMNS, rows, wide=wide)
    if details["stopped"]:
        console.print(f"stopped: {details['stopped']['reason']}", highlight=False)

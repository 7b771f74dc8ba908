"""``metatune submit``: upload a dataset to the object store and request a study
(:mod:`metatune_cli.client` does it; this module reads the flags and prints)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from metatune.contracts import CarbonPreference, RegionGroup, TaskType, TrainingBudget

from ..client.submission import DEFAULTS, draft, resolve
from .calls import client
from .output import JSON_HELP, print_json
from .results import print_results

console = Console()
warnings = Console(stderr=True, highlight=False)


def default(value: object) -> str:
    """An option's default as typer's help writes one, ``[default: 24h]``, for an option whose
    unset value is None (a study file's field applies, else this): the bracket escaped, or rich
    markup would take it for a style and drop it."""
    shown = value.value if isinstance(value, Enum) else value
    return f"\\[default: {shown}]"


TASK_HELP = "classification | pair_classification | causal_lm " + default(DEFAULTS["task"])
CARBON_PREFERENCE_HELP = (
    "greenest: wait for any saving up to the deadline; balanced: wait only for one above "
    "3 gCO2eq/kWh per hour of delay; fastest: earliest finish, carbon breaking ties "
    + default(DEFAULTS["carbon_preference"])
)


def flag(field: str) -> str:
    """How a message names a setting given on the command line: its flag."""
    return "--" + field.replace("_", "-")


def submit(
    source: Path = typer.Argument(
        ...,
        exists=True,
        dir_okay=False,
        readable=True,
        help="CSV, JSON-lines, Parquet or text file, or a study file naming one (.yaml/.yml, or "
        ".json holding one JSON object; docs/study.schema.json)",
        metavar="DATASET|STUDY.yaml",
    ),
    base_model: str | None = typer.Option(
        None,
        help="Embedded alias, local HF model dir or hub id " + default(DEFAULTS["base_model"]),
    ),
    task: TaskType | None = typer.Option(
        None,
        help=TASK_HELP,
    ),
    deadline: str | None = typer.Option(
        None, help="24h / 3d from now, or an ISO time " + default(DEFAULTS["deadline"])
    ),
    name: str | None = typer.Option(
        None, help="What to call the study " + default("the dataset file's name, no suffix")
    ),
    tag: list[str] | None = typer.Option(
        None,
        "--tag",
        metavar="TAG",
        help="A label to file the study under (repeat for several; replaces a study file's tags)",
    ),
    trials: int | None = typer.Option(
        None, min=1, max=50, help="Configurations to train " + default(DEFAULTS["trials"])
    ),
    epochs: float | None = typer.Option(
        None, min=0.001, max=1000, help="Passes over the training rows per trial " + default(3)
    ),
    max_steps: int | None = typer.Option(
        None, min=1, help="Optimizer steps per trial, instead of --epochs"
    ),
    max_train_rows: int | None = typer.Option(
        None,
        min=0,
        help="Training rows a trial uses at most, a seeded sample; 0: every row " + default(1000),
    ),
    gpus_per_trial: int | None = typer.Option(
        None,
        min=1,
        max=64,
        help="GPUs each trial trains on, in one datacenter (torchrun + DDP) "
        + default(DEFAULTS["gpus_per_trial"]),
    ),
    webhook: str | None = typer.Option(
        None, "--webhook", help="URL notified of the study's progress"
    ),
    region_group: RegionGroup | None = typer.Option(
        None, help="Data residency: EU, NA, APAC, SA, AF"
    ),
    home_datacenter: str | None = typer.Option(None, help="Your datacenter (the run-now baseline)"),
    carbon_preference: CarbonPreference | None = typer.Option(
        None,
        help=CARBON_PREFERENCE_HELP,
    ),
    text_column: str | None = typer.Option(
        None,
        help="The column of the text " + default("found by name: text, sentence, premise, ..."),
    ),
    text_pair_column: str | None = typer.Option(
        None,
        help="A pair task's second text column "
        + default("found by name: text_pair, sentence2, hypothesis, ..."),
    ),
    label_column: str | None = typer.Option(
        None,
        help="The column of the label (none for causal_lm) "
        + default("found by name: label, class, intent, ..."),
    ),
    allow_dataset_outside: bool = typer.Option(
        False,
        "--allow-dataset-outside",
        help="Let a study file name a dataset outside its own folder (refused otherwise)",
    ),
    wait: bool = typer.Option(
        False, "--wait", help="Follow the study until it finishes, then print its results"
    ),
    wait_hours: float = typer.Option(
        48.0, min=0.0, help="With --wait: give up after this many hours (exit 4; the study goes on)"
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Upload a dataset and request a study; prints the study id (with --json: also the dataset's
    location, the event id and whether the profiler checked the dataset first). Given a study file
    (docs/study.schema.json), its settings apply and the flags given override them."""
    flags = {
        "base_model": base_model,
        "task": task,
        "deadline": deadline,
        "name": name,
        "tags": tag or None,  # no --tag: the study file's tags, if any
        "trials": trials,
        "budget": TrainingBudget.options(epochs, max_steps, max_train_rows) or None,
        "gpus_per_trial": gpus_per_trial,
        "webhook": webhook,
        "region_group": region_group,
        "home_datacenter": home_datacenter,
        "carbon_preference": carbon_preference,
        "text_column": text_column,
        "text_pair_column": text_pair_column,
        "label_column": label_column,
    }
    progress = Console(stderr=json_output)
    with client() as metatune:
        # every option is checked before anything is uploaded or published
        sources = resolve(source, None, flags, flag, allow_dataset_outside=allow_dataset_outside)
        checked = draft(sources, metatune.settings)
        receipt = metatune.submit_draft(checked)
        if receipt.validation_note:  # published unchecked: one line, stdout stays the receipt
            warnings.print(f"[yellow]warning:[/yellow] {receipt.validation_note}", soft_wrap=True)
        printed: dict[str, Any] = receipt.model_dump(mode="json")
        if json_output and not wait:
            print_json(printed)
            return
        if not json_output:
            console.print(str(receipt.study_id))
            if not wait:
                return
        study = metatune.wait(
            receipt.study_id,
            timeout_s=wait_hours * 3600,
            on_progress=lambda update: progress.print(update.line, highlight=False, soft_wrap=True),
        )
        outcomes = [t.model_dump(mode="json") for t in metatune.results(receipt.study_id)]
    if json_output:
        print_json(printed | {"status": study.status, "results": outcomes})
    else:
        print_results(outcomes)

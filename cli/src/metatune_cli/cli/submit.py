"""``metatune submit``: upload a dataset to the object store and request a study
(:mod:`metatune_cli.client` does it; this module reads the flags and prints)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import typer
from rich.console import Console

from metatune.contracts import CarbonPreference, RegionGroup, TaskType, TrainingBudget

from ..client.submission import DEFAULTS, draft, resolve
from .calls import client
from .output import JSON_HELP, print_json
from .results import print_results

if TYPE_CHECKING:
    from ..client.models import Receipt, StudyDetail
    from ..client.sync import Client

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


# the command's options, one constant each: the signature below reads as the list of flags
SOURCE = typer.Argument(
    ...,
    exists=True,
    dir_okay=False,
    readable=True,
    help="CSV, JSON-lines, Parquet or text file, or a study file naming one (.yaml/.yml, or "
    ".json holding one JSON object; docs/study.schema.json)",
    metavar="DATASET|STUDY.yaml",
)
BASE_MODEL = typer.Option(
    None,
    help="Embedded alias, local HF model dir or hub id " + default(DEFAULTS["base_model"]),
)
TASK = typer.Option(
    None,
    help=TASK_HELP,
)
DEADLINE = typer.Option(
    None, help="24h / 3d from now, or an ISO time " + default(DEFAULTS["deadline"])
)
NAME = typer.Option(
    None, help="What to call the study " + default("the dataset file's name, no suffix")
)
TAG = typer.Option(
    None,
    "--tag",
    metavar="TAG",
    help="A label to file the study under (repeat for several; replaces a study file's tags)",
)
TRIALS = typer.Option(
    None, min=1, max=50, help="Configurations to train " + default(DEFAULTS["trials"])
)
EPOCHS = typer.Option(
    None, min=0.001, max=1000, help="Passes over the training rows per trial " + default(3)
)
MAX_STEPS = typer.Option(None, min=1, help="Optimizer steps per trial, instead of --epochs")
MAX_TRAIN_ROWS = typer.Option(
    None,
    min=0,
    help="Training rows a trial uses at most, a seeded sample; 0: every row " + default(1000),
)
GPUS_PER_TRIAL = typer.Option(
    None,
    min=1,
    max=64,
    help="GPUs each trial trains on, in one datacenter (torchrun + DDP) "
    + default(DEFAULTS["gpus_per_trial"]),
)
WEBHOOK = typer.Option(None, "--webhook", help="URL notified of the study's progress")
REGION_GROUP = typer.Option(None, help="Data residency: EU, NA, APAC, SA, AF")
HOME_DATACENTER = typer.Option(None, help="Your datacenter (the run-now baseline)")
CARBON_PREFERENCE = typer.Option(
    None,
    help=CARBON_PREFERENCE_HELP,
)
TEXT_COLUMN = typer.Option(
    None,
    help="The column of the text " + default("found by name: text, sentence, premise, ..."),
)
TEXT_PAIR_COLUMN = typer.Option(
    None,
    help="A pair task's second text column "
    + default("found by name: text_pair, sentence2, hypothesis, ..."),
)
LABEL_COLUMN = typer.Option(
    None,
    help="The column of the label (none for causal_lm) "
    + default("found by name: label, class, intent, ..."),
)
ALLOW_DATASET_OUTSIDE = typer.Option(
    False,
    "--allow-dataset-outside",
    help="Let a study file name a dataset outside its own folder (refused otherwise)",
)
WAIT = typer.Option(
    False, "--wait", help="Follow the study until it finishes, then print its results"
)
WAIT_HOURS = typer.Option(
    48.0, min=0.0, help="With --wait: give up after this many hours (exit 4; the study goes on)"
)
JSON_OUTPUT = typer.Option(False, "--json", help=JSON_HELP)


def submit(
    source: Path = SOURCE,
    base_model: str | None = BASE_MODEL,
    task: TaskType | None = TASK,
    deadline: str | None = DEADLINE,
    name: str | None = NAME,
    tag: list[str] | None = TAG,
    trials: int | None = TRIALS,
    epochs: float | None = EPOCHS,
    max_steps: int | None = MAX_STEPS,
    max_train_rows: int | None = MAX_TRAIN_ROWS,
    gpus_per_trial: int | None = GPUS_PER_TRIAL,
    webhook: str | None = WEBHOOK,
    region_group: RegionGroup | None = REGION_GROUP,
    home_datacenter: str | None = HOME_DATACENTER,
    carbon_preference: CarbonPreference | None = CARBON_PREFERENCE,
    text_column: str | None = TEXT_COLUMN,
    text_pair_column: str | None = TEXT_PAIR_COLUMN,
    label_column: str | None = LABEL_COLUMN,
    allow_dataset_outside: bool = ALLOW_DATASET_OUTSIDE,
    wait: bool = WAIT,
    wait_hours: float = WAIT_HOURS,
    json_output: bool = JSON_OUTPUT,
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
    with client() as metatune:
        receipt = request_study(metatune, source, flags, allow_dataset_outside)
        print_receipt(receipt, json_output=json_output, wait=wait)
        if not wait:
            return
        study, outcomes = follow(metatune, receipt.study_id, wait_hours, to_stderr=json_output)
    print_finished(receipt, study, outcomes, json_output=json_output)


def request_study(
    metatune: Client, source: Path, flags: dict[str, Any], allow_dataset_outside: bool
) -> Receipt:
    """Check every setting (before anything is uploaded or published), then upload the dataset
    and publish the submission; a submission published unchecked gets one warning line."""
    sources = resolve(source, None, flags, flag, allow_dataset_outside=allow_dataset_outside)
    receipt = metatune.submit_draft(draft(sources, metatune.settings))
    if receipt.validation_note:  # published unchecked: one line, stdout stays the receipt
        warnings.print(f"[yellow]warning:[/yellow] {receipt.validation_note}", soft_wrap=True)
    return receipt


def print_receipt(receipt: Receipt, *, json_output: bool, wait: bool) -> None:
    """The study id; with --json the whole receipt, printed at the end instead when waiting."""
    if not json_output:
        console.print(str(receipt.study_id))
    elif not wait:
        print_json(receipt.model_dump(mode="json"))


def follow(
    metatune: Client, study_id: UUID, wait_hours: float, *, to_stderr: bool
) -> tuple[StudyDetail, list[dict[str, Any]]]:
    """Wait for the study to finish, printing its progress, and read its trials' results."""
    progress = Console(stderr=to_stderr)
    study = metatune.wait(
        study_id,
        timeout_s=wait_hours * 3600,
        on_progress=lambda update: progress.print(update.line, highlight=False, soft_wrap=True),
    )
    return study, [t.model_dump(mode="json") for t in metatune.results(study_id)]


def print_finished(
    receipt: Receipt, study: StudyDetail, outcomes: list[dict[str, Any]], *, json_output: bool
) -> None:
    """A finished study's results: a table, or with --json the receipt, status and results."""
    if json_output:
        print_json(receipt.model_dump(mode="json") | {"status": study.status, "results": outcomes})
    else:
        print_results(outcomes)

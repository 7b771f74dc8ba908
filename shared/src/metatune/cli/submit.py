"""``metatune submit``: upload a dataset to the object store and request a study."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any
from uuid import uuid4

import typer
from pydantic import ValidationError
from rich.console import Console

from .. import subjects
from ..bus import DATASETS_BUCKET, ObjectStore, headers_for
from ..bus.auth import SUBMITTER
from ..bus.clock import load_anchor
from ..bus.streams import stream_for
from ..clock import Clock, RealClock, SimulatedClock
from ..contracts import (
    CarbonPreference,
    DatasetLocation,
    DatasetSubmitted,
    RegionGroup,
    StudySpec,
    TaskType,
)
from ..errors import BusUnavailable, ConfigurationError, ObjectNotFound
from ..settings import get_settings
from ..study_file import SUFFIXES as STUDY_SUFFIXES
from ..study_file import StudyFileError, is_study_file, read_study_file
from ..study_file import parse_deadline as deadline_at
from ..webhook_seal import seal_for_telemetry
from .connect import bus, fail, unavailable
from .output import JSON_HELP, print_json
from .results import print_results, trial_results
from .validation import (
    bad_parameter,
    check_base_model,
    check_datacenter,
    check_gpus_per_trial,
    check_home_in_group,
    one_line,
)
from .wait import wait_for_study

console = Console()


def parse_deadline(text: str, now: datetime) -> datetime:
    """``24h``, ``90m``, ``3d`` from now, or an ISO 8601 time with a zone."""
    try:
        return deadline_at(text, now)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


DEFAULTS: dict[str, Any] = {
    "base_model": "all-MiniLM-L6-v2",
    "task": TaskType.classification,
    "deadline": "24h",
    "trials": 3,
    "gpus_per_trial": 1,
    "carbon_preference": CarbonPreference.greenest,
}


@dataclass(frozen=True)
class Submission:
    """What to submit: the dataset (a local file to upload, or a key already in the datasets
    bucket) and each setting, with where it came from (a flag, the study file, a default)."""

    settings: dict[str, Any]
    dataset: Path | None = None
    object_key: str | None = None
    study_file: Path | None = None
    from_file: frozenset[str] = frozenset()

    def where(self, field: str) -> str:
        """What a message about ``field`` starts with: ``study.yaml: field: `` for the file's."""
        return f"{self.study_file}: {field}: " if field in self.from_file else ""

    def named(self, field: str) -> str:
        """How a message names ``field``'s value: ``study.yaml: field:`` or its flag."""
        return f"{self.study_file}: {field}:" if field in self.from_file else _flag(field)

    def label(self, field: str) -> str:
        return field if field in self.from_file else _flag(field)

    @property
    def dataset_name(self) -> str:
        """The dataset's file name (for the upload's key and the study's default name)."""
        if self.dataset is not None:
            return self.dataset.name
        return PurePosixPath(self.object_key or "dataset").name


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def resolve_submission(source: Path, flags: dict[str, Any]) -> Submission:
    """The dataset and the settings: the flags given, else the study file's (when ``source`` is
    one), else the defaults. A study file that does not validate, or names a dataset that is not
    a readable file, is one line (exit 2) before anything is uploaded."""
    given = {k: v for k, v in flags.items() if v is not None}
    if not is_study_file(source):
        chosen = {**DEFAULTS, **given}
        return Submission({key: chosen.get(key) for key in flags}, dataset=source)
    try:
        study = read_study_file(source)
    except StudyFileError as exc:
        raise fail(str(exc)) from None
    dataset = study.dataset_path(source)
    if dataset is not None:
        if not dataset.is_file():
            raise fail(f"{source}: dataset: {dataset} is not a readable file")
        if dataset.suffix.lower() in STUDY_SUFFIXES:
            raise fail(f"{source}: dataset: {dataset} is a study file, not a dataset")
    from_file = study.model_dump(exclude={"dataset"}, exclude_none=True)
    chosen = {**DEFAULTS, **from_file, **given}
    return Submission(
        {key: chosen.get(key) for key in flags},
        dataset=dataset,
        object_key=study.object_key(),
        study_file=source,
        from_file=frozenset(from_file) - frozenset(given),
    )


async def platform_clock(js) -> Clock:
    """The platform's clock: the simulated one whose anchor is in KV, else real time."""
    anchor = await load_anchor(js)
    return SimulatedClock(anchor) if anchor else RealClock()


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
        help=f"Embedded alias, local HF model dir or hub id [default: {DEFAULTS['base_model']}]",
    ),
    task: TaskType | None = typer.Option(
        None, help="classification | pair_classification | causal_lm [default: classification]"
    ),
    deadline: str | None = typer.Option(
        None, help="24h / 3d from now, or an ISO time [default: 24h]"
    ),
    name: str | None = typer.Option(
        None, help="What to call the study (default: the dataset file's name, no suffix)"
    ),
    tag: list[str] | None = typer.Option(
        None,
        "--tag",
        metavar="TAG",
        help="A label to file the study under (repeat for several; replaces a study file's tags)",
    ),
    trials: int | None = typer.Option(
        None, min=1, max=50, help="Configurations to train [default: 3]"
    ),
    gpus_per_trial: int | None = typer.Option(
        None,
        min=1,
        max=64,
        help="GPUs each trial trains on, in one datacenter (torchrun + DDP) [default: 1]",
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
        help="greenest: wait for any saving up to the deadline; balanced: wait only for one above "
        "3 gCO2eq/kWh per hour of delay; fastest: earliest finish, carbon breaking ties "
        "[default: greenest]",
    ),
    text_column: str | None = typer.Option(None),
    text_pair_column: str | None = typer.Option(None),
    label_column: str | None = typer.Option(None),
    wait: bool = typer.Option(
        False, "--wait", help="Follow the study until it finishes, then print its results"
    ),
    wait_hours: float = typer.Option(
        48.0, min=0.0, help="With --wait: give up after this many hours (exit 4; the study goes on)"
    ),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Upload a dataset and request a study; prints the study id (with --json: also the dataset's
    location and the event id). Given a study file (docs/study.schema.json), its settings apply and
    the flags given override them."""
    sub = resolve_submission(
        source,
        {
            "base_model": base_model,
            "task": task,
            "deadline": deadline,
            "name": name,
            "tags": tag or None,  # no --tag: the study file's tags, if any
            "trials": trials,
            "gpus_per_trial": gpus_per_trial,
            "webhook": webhook,
            "region_group": region_group,
            "home_datacenter": home_datacenter,
            "carbon_preference": carbon_preference,
            "text_column": text_column,
            "text_pair_column": text_pair_column,
            "label_column": label_column,
        },
    )
    chosen = sub.settings
    settings = get_settings()
    study_id = uuid4()
    key = sub.object_key or f"studies/{study_id}/{sub.dataset_name}"
    # Every option is checked before anything is uploaded or published.
    check_base_model(chosen["base_model"], sub.where("base_model"))
    home, group = chosen["home_datacenter"], chosen["region_group"]
    if home is not None:
        check_datacenter(home, settings, sub.where("home_datacenter"))
        if group is not None:
            home_name = sub.named("home_datacenter")
            if "region_group" in sub.from_file and "home_datacenter" not in sub.from_file:
                home_name = f"{sub.named('region_group')} {home_name}"
            check_home_in_group(home, group, settings, home_name, sub.label("region_group"))
    check_gpus_per_trial(chosen["gpus_per_trial"], settings, sub.named("gpus_per_trial"))
    try:
        draft = StudySpec(
            name=chosen["name"] or sub.dataset_name.split(".")[0],
            tags=chosen["tags"] or (),
            dataset=DatasetLocation(kind="object", ref=key),
            task=chosen["task"],
            base_model=chosen["base_model"],
            deadline=parse_deadline(chosen["deadline"], datetime.now(UTC)),
            trials=chosen["trials"],
            gpus_per_trial=chosen["gpus_per_trial"],
            webhook_url=chosen["webhook"],
            region_group=group,
            home_datacenter=home,
            carbon_preference=chosen["carbon_preference"],
            text_column=chosen["text_column"],
            text_pair_column=chosen["text_pair_column"],
            label_column=chosen["label_column"],
        )
        if draft.webhook_url is not None:  # its credentials leave sealed, for telemetry only
            public, sealed = seal_for_telemetry(str(draft.webhook_url), settings)
            draft = StudySpec.model_validate(
                {**draft.model_dump(), "webhook_url": public, "webhook_sealed": sealed}
            )
    except typer.BadParameter as exc:
        raise bad_parameter(exc) from None
    except ValidationError as exc:
        raise fail(f"invalid submission: {one_line(exc)}") from None
    except ConfigurationError as exc:
        raise fail(str(exc)) from None

    async def run() -> DatasetSubmitted:
        async with bus(settings, SUBMITTER) as nc:
            js = nc.jetstream()
            clock = await platform_clock(js)
            objects = ObjectStore(js)
            if sub.dataset is not None:
                sha: str | None = await objects.put_file(DATASETS_BUCKET, key, sub.dataset)
                size = sub.dataset.stat().st_size
            else:  # already in the bucket: checked, not uploaded again
                try:
                    size, sha = await objects.stat(DATASETS_BUCKET, key)
                except ObjectNotFound as exc:
                    raise fail(f"{sub.study_file}: dataset.object_key: {exc}") from None
            location = DatasetLocation(kind="object", ref=key, size_bytes=size, sha256=sha)
            spec = draft.model_copy(
                update={
                    "dataset": location,
                    "deadline": parse_deadline(chosen["deadline"], clock.now()),
                }
            )
            event = DatasetSubmitted(occurred_at=clock.now(), study_id=study_id, spec=spec)
            await js.publish(
                subjects.DATASETS_SUBMITTED,
                event.to_bytes(),
                headers=headers_for(event),
                stream=stream_for(subjects.DATASETS_SUBMITTED, settings),
            )
            return event

    try:
        event = asyncio.run(run())
    except BusUnavailable as exc:
        raise unavailable(exc) from None
    except ValueError as exc:  # contract validation of the user's options
        raise fail(f"invalid submission: {exc}") from None
    receipt: dict[str, Any] = {
        "study_id": str(study_id),
        "dataset": event.spec.dataset,
        "event_id": str(event.event_id),
    }
    if json_output and not wait:
        print_json(receipt)
        return
    if not json_output:
        console.print(str(study_id))
        if not wait:
            return
    progress = Console(stderr=json_output)
    study = wait_for_study(
        settings, study_id, wait_hours * 3600, lambda line: progress.print(line, highlight=False)
    )
    outcomes = trial_results(settings, study)
    if json_output:
        print_json(receipt | {"status": study.status, "results": outcomes})
    else:
        print_results(outcomes)

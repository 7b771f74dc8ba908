"""``metatune submit``: upload a dataset to the object store and request a study."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
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
from ..errors import BusUnavailable, ConfigurationError
from ..settings import get_settings
from ..study_file import StudyFileError, is_study_file, read_study_file
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
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhd])\s*$")


def parse_deadline(text: str, now: datetime) -> datetime:
    """``24h``, ``90m``, ``3d`` from now, or an ISO 8601 time with a zone."""
    match = _RELATIVE.match(text)
    if match:
        value, unit = float(match.group(1)), match.group(2)
        return now + timedelta(**{{"m": "minutes", "h": "hours", "d": "days"}[unit]: value})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise typer.BadParameter(
            f"{text!r}: use 24h / 90m / 3d or an ISO time with a zone"
        ) from exc
    if moment.tzinfo is None:
        raise typer.BadParameter(f"{text!r} has no time zone (add Z or +01:00)")
    return moment.astimezone(UTC)


DEFAULTS: dict[str, Any] = {
    "base_model": "all-MiniLM-L6-v2",
    "task": TaskType.classification,
    "deadline": "24h",
    "trials": 3,
    "gpus_per_trial": 1,
    "carbon_preference": CarbonPreference.greenest,
}


def resolve_submission(source: Path, flags: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The dataset and the settings: the flags given, else the study file's (when ``source`` is
    one), else the defaults. A study file that does not validate, or names a dataset that is not
    a readable file, is one line (exit 2) before anything is uploaded."""
    from_file: dict[str, Any] = {}
    dataset = source
    if is_study_file(source):
        try:
            study = read_study_file(source)
        except StudyFileError as exc:
            raise fail(str(exc)) from None
        dataset = study.dataset_path(source)
        if not dataset.is_file():
            raise fail(f"{source}: dataset: {dataset} is not a readable file")
        from_file = study.model_dump(exclude={"dataset"}, exclude_none=True)
    chosen = {**DEFAULTS, **from_file, **{k: v for k, v in flags.items() if v is not None}}
    return dataset, {key: chosen.get(key) for key in flags}


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
        help="CSV, JSON-lines, Parquet or text file, or a study file (.yaml/.yml) naming one",
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
    flags = {
        "base_model": base_model,
        "task": task,
        "deadline": deadline,
        "name": name,
        "trials": trials,
        "gpus_per_trial": gpus_per_trial,
        "webhook": webhook,
        "region_group": region_group,
        "home_datacenter": home_datacenter,
        "carbon_preference": carbon_preference,
        "text_column": text_column,
        "text_pair_column": text_pair_column,
        "label_column": label_column,
    }
    dataset, chosen = resolve_submission(source, flags)
    base_model, task, deadline = chosen["base_model"], chosen["task"], chosen["deadline"]
    name, trials, gpus_per_trial = chosen["name"], chosen["trials"], chosen["gpus_per_trial"]
    webhook, region_group = chosen["webhook"], chosen["region_group"]
    home_datacenter, carbon_preference = chosen["home_datacenter"], chosen["carbon_preference"]
    text_column, text_pair_column = chosen["text_column"], chosen["text_pair_column"]
    label_column = chosen["label_column"]
    settings = get_settings()
    study_id = uuid4()
    key = f"studies/{study_id}/{dataset.name}"
    # Every option is checked before anything is uploaded or published.
    check_base_model(base_model)
    if home_datacenter is not None:
        check_datacenter(home_datacenter, settings)
        if region_group is not None:
            check_home_in_group(home_datacenter, region_group, settings)
    check_gpus_per_trial(gpus_per_trial, settings)
    try:
        draft = StudySpec(
            name=name or dataset.name.split(".")[0],
            dataset=DatasetLocation(kind="object", ref=key),
            task=task,
            base_model=base_model,
            deadline=parse_deadline(deadline, datetime.now(UTC)),
            trials=trials,
            gpus_per_trial=gpus_per_trial,
            webhook_url=webhook,
            region_group=region_group,
            home_datacenter=home_datacenter,
            carbon_preference=carbon_preference,
            text_column=text_column,
            text_pair_column=text_pair_column,
            label_column=label_column,
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
            sha = await ObjectStore(js).put_file(DATASETS_BUCKET, key, dataset)
            location = DatasetLocation(
                kind="object", ref=key, size_bytes=dataset.stat().st_size, sha256=sha
            )
            spec = draft.model_copy(
                update={"dataset": location, "deadline": parse_deadline(deadline, clock.now())}
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

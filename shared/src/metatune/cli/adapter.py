"""``metatune adapter download JOB --out DIR``: the trained PEFT adapter of a completed job, as a
folder ready for the Hugging Face Hub.

The trainer-agent uploads each adapter as a tar of the PEFT directory plus ``metatune.json`` to the
object store bucket ``adapters``, under the key its ``RunCompleted.adapter_key`` names. The
extracted folder gets what the Hub reads, from the event log: a model card ``README.md``
(:mod:`metatune.model_card`: metadata, metrics against the majority baseline, energy and
emissions), the label map ``labels.json`` (``id2label``/``label2id``) and, where PEFT recorded
the base model as the training machine's local path, its Hub id in ``adapter_config.json``. It
still loads with ``peft.PeftModel.from_pretrained(base, DIR)``.
"""

from __future__ import annotations

import asyncio
import json
import tarfile
import tempfile
from pathlib import Path

import typer
from rich.console import Console

from ..bus import ADAPTERS_BUCKET, ObjectStore
from ..contracts import RunCompleted, StudySpec
from ..errors import BusUnavailable, ObjectNotFound
from ..model_card import LABELS_FILE, label_maps, model_card
from ..models import hub_model_id
from ..registry import load_registry
from ..settings import Settings, get_settings
from .connect import bus, fail, unavailable
from .study import load_studies, print_json
from .validation import parse_id

console = Console()
adapter_app = typer.Typer(help="Trained LoRA adapters.", no_args_is_help=True)


CARD = "README.md"
PEFT_CONFIG = "adapter_config.json"


def completed_run(settings: Settings, job: str) -> tuple[RunCompleted, str, StudySpec | None]:
    """The job's completion, the adapter key it names and its study's submission, or one clear
    line saying why there is no adapter."""
    job_id = parse_id(job, "job")
    study = next((s for s in load_studies(settings).values() if job_id in s.trials), None)
    if study is None:
        raise fail(f"no job {job_id} in the event log", code=1)
    trial = study.trials[job_id]
    if trial.completed is None or trial.completed.adapter_key is None:
        raise fail(f"job {job_id} has no adapter: it is {trial.status}", code=1)
    submitted = study.submitted or study.profiled
    return trial.completed, trial.completed.adapter_key, submitted.spec if submitted else None


def make_hub_ready(
    out: Path,
    run: RunCompleted,
    spec: StudySpec | None,
    labels: list[str],
    regions: dict[str, str],
) -> None:
    """Write the model card and the label map into the extracted adapter ``out`` (the README.md
    template PEFT saved, naming the training machine's path as base model, is replaced)."""
    if labels:
        (out / LABELS_FILE).write_text(json.dumps(label_maps(labels), indent=2) + "\n")
    (out / CARD).write_text(model_card(run, spec=spec, labels=labels, regions=regions))
    base = run.base_model or (spec.base_model if spec else None)
    name_base_on_hub(out / PEFT_CONFIG, hub_model_id(base) if base else None)


def name_base_on_hub(config_file: Path, hub_id: str | None) -> None:
    """PEFT records the base model as it was loaded: on the trainer-agent, a local folder (the
    embedded MiniLM's, inside its venv), which means nothing elsewhere. Name its Hub id instead, as
    PEFT writes it for a model loaded from the Hub; every other key stays as PEFT wrote it."""
    if hub_id is None or not config_file.is_file():
        return
    config = json.loads(config_file.read_text())
    recorded = config.get("base_model_name_or_path")
    if isinstance(recorded, str) and hub_model_id(recorded) is None:
        config["base_model_name_or_path"] = hub_id
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True))  # as PEFT writes it


@adapter_app.command("download")
def download(
    job: str = typer.Argument(..., help="Job (trial) id, as `metatune study show` lists it"),
    out: Path = typer.Option(..., "--out", help="Directory to write the adapter to (new or empty)"),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Download JOB's adapter into OUT, with a Hugging Face model card; it loads with
    peft.PeftModel.from_pretrained(base_model, OUT)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise fail(f"{out} exists and is not an empty directory")
    settings = get_settings()
    run, key, spec = completed_run(settings, job)
    regions = {dc.name: dc.region for dc in load_registry(settings.registry_path).datacenters}

    async def fetch(archive: Path) -> None:
        async with bus(settings) as nc:
            await ObjectStore(nc.jetstream()).get_to_file(ADAPTERS_BUCKET, key, archive)

    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "adapter.tar"
        try:
            asyncio.run(fetch(archive))
        except BusUnavailable as exc:
            raise unavailable(exc) from None
        except ObjectNotFound as exc:
            raise fail(str(exc), code=1) from None
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(out, filter="data")  # no absolute paths, links out or devices
    metadata_file = out / "metatune.json"  # the trainer-agent's: labels by id, task, config
    metadata = json.loads(metadata_file.read_text()) if metadata_file.is_file() else {}
    labels = [str(name) for name in metadata.get("labels") or []]
    make_hub_ready(out, run, spec, labels, regions)
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    if raw:
        print_json(
            {
                "job_id": job,
                "key": f"{ADAPTERS_BUCKET}/{key}",
                "out": str(out),
                "files": files,
                "metadata": metadata,
                "card": CARD,
                "labels": labels,
            }
        )
        return
    console.print(f"{ADAPTERS_BUCKET}/{key} -> {out} ({', '.join(files)})", highlight=False)
    console.print(
        f"model card {out / CARD}; publish the folder with `hf upload <user>/<name> {out}`",
        highlight=False,
    )

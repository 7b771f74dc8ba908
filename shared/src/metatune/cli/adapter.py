"""``metatune adapter download JOB --out DIR``: the trained PEFT adapter of a completed job.

The trainer-agent uploads each adapter as a tar of the PEFT directory plus ``metatune.json`` to the
object store bucket ``adapters``, under the key its ``RunCompleted.adapter_key`` names; the
extracted folder loads with ``peft.PeftModel.from_pretrained(base, DIR)``.
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
from ..errors import BusUnavailable, ObjectNotFound
from ..settings import Settings, get_settings
from .connect import bus, fail, unavailable
from .study import load_studies, print_json
from .validation import parse_id

console = Console()
adapter_app = typer.Typer(help="Trained LoRA adapters.", no_args_is_help=True)


def adapter_key(settings: Settings, job: str) -> str:
    """The adapter key the job's completion names, or one clear line saying why there is none."""
    job_id = parse_id(job, "job")
    trial = next(
        (s.trials[job_id] for s in load_studies(settings).values() if job_id in s.trials), None
    )
    if trial is None:
        raise fail(f"no job {job_id} in the event log", code=1)
    if trial.completed is None or trial.completed.adapter_key is None:
        raise fail(f"job {job_id} has no adapter: it is {trial.status}", code=1)
    return trial.completed.adapter_key


@adapter_app.command("download")
def download(
    job: str = typer.Argument(..., help="Job (trial) id, as `metatune study show` lists it"),
    out: Path = typer.Option(..., "--out", help="Directory to write the adapter to (new or empty)"),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Download JOB's adapter into OUT; it loads with peft.PeftModel.from_pretrained(base_model, OUT)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise fail(f"{out} exists and is not an empty directory")
    settings = get_settings()
    key = adapter_key(settings, job)

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
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    metadata_file = out / "metatune.json"
    metadata = json.loads(metadata_file.read_text()) if metadata_file.is_file() else {}
    if raw:
        print_json(
            {
                "job_id": job,
                "key": f"{ADAPTERS_BUCKET}/{key}",
                "out": str(out),
                "files": files,
                "metadata": metadata,
            }
        )
        return
    console.print(f"{ADAPTERS_BUCKET}/{key} -> {out} ({', '.join(files)})", highlight=False)

"""``metatune adapter download JOB --out DIR``: the trained PEFT adapter of a completed job, as a
folder ready for the Hugging Face Hub (:mod:`metatune_cli.client.adapters` says what it holds)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from .calls import client
from .output import print_json

console = Console()
adapter_app = typer.Typer(help="Trained LoRA adapters.", no_args_is_help=True)


@adapter_app.command("download")
def download(
    job: str = typer.Argument(
        ...,
        help="Job (trial) id, as `metatune results` lists it, or a prefix naming one job",
    ),
    out: Path = typer.Option(..., "--out", help="Directory to write the adapter to (new or empty)"),
    raw: bool = typer.Option(False, "--json", help="Print JSON"),
) -> None:
    """Download JOB's adapter into OUT, with a Hugging Face model card; it loads with
    peft.PeftModel.from_pretrained(base_model, OUT)."""
    with client() as metatune:
        done = metatune.download_adapter(job, out)
    if raw:
        print_json(done.model_dump(mode="json"))
        return
    console.print(f"{done.key} -> {out} ({', '.join(done.files)})", highlight=False)
    console.print(
        f"model card {out / done.card}; publish the folder with `hf upload <user>/<name> {out}`",
        highlight=False,
    )

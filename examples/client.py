"""Submit a study from Python, follow it, print its results: what `metatune submit --wait` does.

    python examples/client.py                       # examples/study.yaml (the Snips intents)
    python examples/client.py my-data.jsonl --trials 2

It talks to the platform `metatune up` (or `metatune demo`) started, through the NATS of
METATUNE_NATS_URL, as the CLI does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from metatune.display import trial_label
from metatune_cli.client import Client, MetaTuneError, Progress

HERE = Path(__file__).resolve().parent


def figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default=HERE / "study.yaml", type=Path)
    parser.add_argument("--trials", type=int, help="override the study file's budget")
    parser.add_argument("--wait-hours", type=float, default=48.0)
    args = parser.parse_args()

    def report(update: Progress) -> None:
        print(update.line, flush=True)

    try:
        with Client() as client:
            receipt = client.submit(args.source, trials=args.trials)
            print(f"study {receipt.study_id}: dataset {receipt.dataset.ref}", flush=True)
            study = client.wait(
                receipt.study_id, timeout_s=args.wait_hours * 3600, on_progress=report
            )
            print(f"{study.name}: {study.status}")
            for trial in client.results(study.study_id):
                accuracy = trial.metrics.accuracy if trial.metrics else None
                print(
                    f"  trial {trial_label(trial.trial_index)}: {trial.status}, "
                    f"accuracy {figure(accuracy)}, {figure(trial.energy_wh)} Wh, "
                    f"{figure(trial.realised_emissions_g)} gCO2eq realised"
                )
    except MetaTuneError as exc:  # NATS not there, a bad option, a study still running
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Trainer benchmark: the agent's training loop against a naive loop, same model, data and steps.

naive  = every batch padded to max_seq_length, fp32, random batches (no length grouping)
agent  = the agent's defaults: dynamic padding, length-grouped batches, and on GPU bf16/fp16
         autocast (with a grad scaler for fp16) and padding to a multiple of 8

Both run through ``run_training`` (the agent's one code path) with the levers on or off, on
the embedded all-MiniLM-L6-v2 with LoRA, for the same number of optimizer steps. Throughput
counts useful (non-padding) tokens per second of time spent inside optimizer steps (model
loading and evaluation excluded, and identical for both). On CPU an extra row shows bf16
autocast, which is why 'auto' keeps fp32 on CPUs without bf16 matrix units.

    python bench/trainer_bench.py                     # CPU
    python bench/trainer_bench.py --device cuda       # GPU (adds the mixed-precision lever)
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from metatune.contracts import LoraConfig, TaskType
from metatune_agent.domain.request import TrainingRequest, TrainOptions
from metatune_agent.domain.run import RunOutcome, Site, run_training

SHARED_TEXT = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "text"
DATASETS = {"sst2": ("sst2.jsonl.gz", TaskType.classification), "rte": ("rte.jsonl.gz", TaskType.pair_classification)}


@dataclass
class Row:
    dataset: str
    variant: str
    outcome: RunOutcome

    @property
    def tokens_per_second(self) -> float:
        return self.outcome.accounting.tokens_seen / max(self.outcome.train_seconds, 1e-9)

    @property
    def padding_per_useful(self) -> float:
        acc = self.outcome.accounting
        return acc.tokens_with_padding / max(acc.tokens_seen, 1)


def slice_dataset(name: str, rows: int, directory: Path) -> Path:
    source = SHARED_TEXT / name
    target = directory / name.removesuffix(".gz")
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        records = [json.loads(line) for _, line in zip(range(rows), fh, strict=False)]
    target.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return target


def variants(device: str) -> dict[str, TrainOptions]:
    common = {"device": device, "early_stopping": False, "smoke_test": False, "max_eval_examples": 64}
    found = {
        "naive": TrainOptions(**common, dynamic_padding=False, group_by_length=False, precision="fp32"),
        "agent": TrainOptions(**common),
    }
    if not device.startswith("cuda"):
        found["agent+bf16"] = TrainOptions(**common, precision="bf16")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--rows", type=int, default=1000, help="rows of each dataset to train on")
    parser.add_argument("--datasets", nargs="+", default=["sst2", "rte"], choices=sorted(DATASETS))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    console = Console(width=160)
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor() or "cpu"
    console.print(f"device {args.device} ({device_name}), torch {torch.__version__}, {torch.get_num_threads()} threads")

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            file, task = DATASETS[name]
            path = slice_dataset(file, args.rows, Path(tmp))
            config = LoraConfig(batch_size=args.batch_size, max_seq_length=args.max_seq_length, max_steps=args.steps)
            for variant, options in variants(args.device).items():
                request = TrainingRequest(dataset=path, task=task, base_model="all-MiniLM-L6-v2", config=config,
                                          options=options.model_copy(update={"cache_dir": Path(tmp) / "cache"}))
                outcome = run_training(request, site=Site(idle_seconds=0.5))
                rows.append(Row(name, variant, outcome))
                console.print(f"  {name}: {variant}: {outcome.train_seconds:.1f} s")

    table = Table(title=f"trainer loop vs naive loop: {args.steps} steps, batch {args.batch_size}, "
                        f"max_seq_length {args.max_seq_length}, {args.device}")
    for column in ("dataset", "variant", "precision", "useful tokens", "tokens incl. padding",
                   "padding per useful token", "step time s", "useful tokens/s", "speed-up", "val loss"):
        table.add_column(column, justify="left" if column in ("dataset", "variant") else "right")
    for row in rows:
        baseline = next(r for r in rows if r.dataset == row.dataset and r.variant == "naive")
        acc = row.outcome.accounting
        table.add_row(
            row.dataset, row.variant, row.outcome.precision, f"{acc.tokens_seen:,}", f"{acc.tokens_with_padding:,}",
            f"{row.padding_per_useful:.2f}", f"{row.outcome.train_seconds / max(row.outcome.step, 1):.3f}",
            f"{row.tokens_per_second:,.0f}", f"{row.tokens_per_second / baseline.tokens_per_second:.2f}x",
            f"{row.outcome.evaluation.loss:.4f}" if row.outcome.evaluation else "-",
        )
    console.print(table)
    console.print("naive: pad to max_seq_length, fp32, random batches | agent: dynamic padding, length-grouped "
                  "batches, auto precision (bf16/fp16 autocast on GPU, fp32 on CPU) | agent+bf16: the agent with "
                  "bf16 autocast forced on CPU")


if __name__ == "__main__":
    main()

"""Trainer benchmark: the agent's training loop against a naive loop, same model, data and steps.

naive  = every batch padded to max_seq_length, fp32, random batches (no length grouping)
agent  = the agent's defaults: dynamic padding, length-grouped batches, and on GPU bf16/fp16
         autocast (with a grad scaler for fp16) and padding to a multiple of 8

Both run through ``run_training`` (the agent's one code path) with the levers on or off, on
the embedded all-MiniLM-L6-v2 with LoRA, for the same number of optimizer steps. Throughput
counts useful (non-padding) tokens per second of time spent inside optimizer steps (model
loading and evaluation excluded, and identical for both). On CPU an extra row shows bf16
autocast.

``--precision-compare`` measures bf16 autocast against fp32 on CPU instead: the agent's loop with
each precision, on a few datasets, two seeds each (runs interleaved, so a shared machine's load falls
on both alike), reporting step throughput and final validation loss / accuracy. bf16 "matches
within noise" when its mean final loss differs from fp32's by no more than the spread between the
two seeds. This is the measurement behind ``precision=auto`` picking bf16 on CPUs with native bf16.

    python bench/trainer_bench.py --data ../shared/data/text                     # CPU
    python bench/trainer_bench.py --data ../shared/data/text --device cuda       # GPU (adds the mixed-precision lever)
    python bench/trainer_bench.py --data ../shared/data/text --precision-compare [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import statistics
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from metatune.contracts import LoraConfig, TaskType
from metatune_trainer_agent.adapters.devices import cpu_has_native_bf16
from metatune_trainer_agent.adapters.hardware import cpu_model
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.domain.request import TrainingRequest, TrainOptions
from metatune_trainer_agent.domain.run import RunOutcome, Site

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import progress

DATASETS = {
    "sst2": ("sst2.jsonl.gz", TaskType.classification),
    "rte": ("rte.jsonl.gz", TaskType.pair_classification),
    "trec6": ("trec6.jsonl.gz", TaskType.classification),
    "subj": ("subj.jsonl.gz", TaskType.classification),
}


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


def slice_dataset(
    data: Path, name: str, rows: int, directory: Path, *, shuffle: bool = False
) -> Path:
    source = data / name
    target = directory / name.removesuffix(".gz")
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        if shuffle:  # a seeded sample: the files can be sorted by label
            records = [json.loads(line) for line in fh]
            records = random.Random(0).sample(records, min(rows, len(records)))
        else:
            records = [json.loads(line) for _, line in zip(range(rows), fh, strict=False)]
    target.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return target


def variants(device: str) -> dict[str, TrainOptions]:
    common = {
        "device": device,
        "early_stopping": False,
        "smoke_test": False,
        "max_eval_examples": 64,
    }
    found = {
        "naive": TrainOptions(
            **common, dynamic_padding=False, group_by_length=False, precision="fp32"
        ),
        "agent": TrainOptions(**common),
    }
    if not device.startswith("cuda"):  # the other CPU precision than the one 'auto' picks
        if cpu_has_native_bf16():
            found["agent+fp32"] = TrainOptions(**common, precision="fp32")
        else:
            found["agent+bf16"] = TrainOptions(**common, precision="bf16")
    return found


def loop_report(args: argparse.Namespace, rows: list[Row]) -> dict:
    """The table as one JSON object: one entry per dataset and loop, speed-up against naive."""
    out = []
    for row in rows:
        naive = next(r for r in rows if r.dataset == row.dataset and r.variant == "naive")
        acc = row.outcome.accounting
        out.append(
            {
                "dataset": row.dataset,
                "variant": row.variant,
                "precision": row.outcome.precision,
                "useful_tokens": acc.tokens_seen,
                "tokens_with_padding": acc.tokens_with_padding,
                "padding_per_useful_token": row.padding_per_useful,
                "step_s": row.outcome.train_seconds / max(row.outcome.step, 1),
                "useful_tokens_per_s": row.tokens_per_second,
                "speedup": row.tokens_per_second / naive.tokens_per_second,
                "val_loss": row.outcome.evaluation.loss if row.outcome.evaluation else None,
            }
        )
    return {
        "device": args.device,
        "cpu": platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
        "steps": args.steps,
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "rows": out,
    }


# long: one block per precision compared, in the table's order
def precision_compare(args: argparse.Namespace, console: Console) -> None:
    """bf16 autocast against fp32 on CPU: speed, final loss and accuracy, two seeds for the noise."""
    results: dict[tuple[str, str], list[RunOutcome]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in progress(args.datasets, "datasets"):
            file, task = DATASETS[name]
            path = slice_dataset(args.data, file, args.rows, Path(tmp), shuffle=True)
            for seed in args.seeds:
                config = LoraConfig(
                    batch_size=args.batch_size,
                    max_seq_length=args.max_seq_length,
                    max_steps=args.steps,
                    learning_rate=args.learning_rate,
                    seed=seed,
                )
                for precision in ("fp32", "bf16"):
                    options = TrainOptions(
                        device="cpu",
                        precision=precision,
                        early_stopping=False,
                        smoke_test=False,
                        max_eval_examples=64,
                        eval_every=args.steps,
                        cache_dir=Path(tmp) / "cache",
                    )
                    request = TrainingRequest(
                        dataset=path,
                        task=task,
                        base_model="all-MiniLM-L6-v2",
                        config=config,
                        options=options,
                    )
                    outcome = run_training(request, site=Site(idle_seconds=0.2))
                    results.setdefault((name, precision), []).append(outcome)
                    assert outcome.evaluation is not None
                    console.print(
                        f"  {name} seed {seed} {precision}: {outcome.train_seconds:.1f} s in steps, "
                        f"val loss {outcome.evaluation.loss:.4f}, accuracy {outcome.evaluation.accuracy:.3f}"
                    )

    def tps(o: RunOutcome) -> float:
        return o.accounting.tokens_seen / max(o.train_seconds, 1e-9)

    summary = []
    for name in args.datasets:
        fp32, bf16 = results[(name, "fp32")], results[(name, "bf16")]
        losses = {p: [o.evaluation.loss for o in results[(name, p)]] for p in ("fp32", "bf16")}  # type: ignore[union-attr]
        accs = {
            p: [o.evaluation.accuracy or 0.0 for o in results[(name, p)]] for p in ("fp32", "bf16")
        }  # type: ignore[union-attr]
        noise = max(max(v) - min(v) for v in losses.values())
        diff = statistics.mean(losses["bf16"]) - statistics.mean(losses["fp32"])
        summary.append(
            {
                "dataset": name,
                "fp32_tokens_per_s": statistics.mean(tps(o) for o in fp32),
                "bf16_tokens_per_s": statistics.mean(tps(o) for o in bf16),
                "speedup": statistics.mean(tps(o) for o in bf16)
                / statistics.mean(tps(o) for o in fp32),
                "fp32_val_loss": losses["fp32"],
                "bf16_val_loss": losses["bf16"],
                "fp32_accuracy": accs["fp32"],
                "bf16_accuracy": accs["bf16"],
                "loss_diff": diff,
                "seed_noise": noise,
                "within_noise": abs(diff) <= noise,
            }
        )
    if args.json:
        print(
            json.dumps(
                {
                    "cpu": cpu_model() or platform.machine(),
                    "native_bf16": cpu_has_native_bf16(),
                    "threads": torch.get_num_threads(),
                    "steps": args.steps,
                    "batch_size": args.batch_size,
                    "learning_rate": args.learning_rate,
                    "seeds": args.seeds,
                    "speedup_mean": statistics.mean(r["speedup"] for r in summary),
                    "all_within_noise": all(r["within_noise"] for r in summary),
                    "datasets": summary,
                }
            )
        )
        return
    table = Table(
        title=f"bf16 autocast vs fp32 on CPU (native bf16: {cpu_has_native_bf16()}): {args.steps} steps, "
        f"batch {args.batch_size}, lr {args.learning_rate:g}, seeds {args.seeds}"
    )
    for column in (
        "dataset",
        "fp32 tokens/s",
        "bf16 tokens/s",
        "speed-up",
        "fp32 val loss",
        "bf16 val loss",
        "fp32 accuracy",
        "bf16 accuracy",
        "bf16 - fp32 loss",
        "seed spread",
        "within noise",
    ):
        table.add_column(column, justify="left" if column == "dataset" else "right")
    for r in summary:
        table.add_row(
            r["dataset"],
            f"{r['fp32_tokens_per_s']:,.0f}",
            f"{r['bf16_tokens_per_s']:,.0f}",
            f"{r['speedup']:.2f}x",
            " / ".join(f"{v:.4f}" for v in r["fp32_val_loss"]),
            " / ".join(f"{v:.4f}" for v in r["bf16_val_loss"]),
            " / ".join(f"{v:.3f}" for v in r["fp32_accuracy"]),
            " / ".join(f"{v:.3f}" for v in r["bf16_accuracy"]),
            f"{r['loss_diff']:+.4f}",
            f"{r['seed_noise']:.4f}",
            "yes" if r["within_noise"] else "no",
        )
    console.print(table)


# long: the bench's protocol in order, one block per step of its docstring
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, required=True, help="folder of the text datasets (shared/data/text)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="optimizer steps (default 10; 64 with --precision-compare)",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--rows", type=int, default=1000, help="rows of each dataset to train on")
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        choices=sorted(DATASETS),
        help="default: sst2 rte (sst2 rte trec6 with --precision-compare)",
    )
    parser.add_argument(
        "--precision-compare", action="store_true", help="bf16 autocast vs fp32 on CPU, two seeds"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[13, 14], help="seeds of --precision-compare"
    )
    parser.add_argument(
        "--learning-rate", type=float, default=1e-3, help="learning rate of --precision-compare"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (tables go to stderr)"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    console = Console(width=180, stderr=args.json)
    device_name = (
        torch.cuda.get_device_name(0)
        if args.device.startswith("cuda")
        else platform.processor() or "cpu"
    )
    console.print(
        f"device {args.device} ({device_name}), torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    if args.precision_compare:
        args.steps = args.steps or 64
        args.datasets = args.datasets or ["sst2", "rte", "trec6"]
        precision_compare(args, console)
        return
    args.steps = args.steps or 10
    args.datasets = args.datasets or ["sst2", "rte"]

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in progress(args.datasets, "datasets"):
            file, task = DATASETS[name]
            path = slice_dataset(args.data, file, args.rows, Path(tmp))
            config = LoraConfig(
                batch_size=args.batch_size, max_seq_length=args.max_seq_length, max_steps=args.steps
            )
            for variant, options in variants(args.device).items():
                request = TrainingRequest(
                    dataset=path,
                    task=task,
                    base_model="all-MiniLM-L6-v2",
                    config=config,
                    options=options.model_copy(update={"cache_dir": Path(tmp) / "cache"}),
                )
                outcome = run_training(request, site=Site(idle_seconds=0.5))
                rows.append(Row(name, variant, outcome))
                console.print(f"  {name}: {variant}: {outcome.train_seconds:.1f} s")

    table = Table(
        title=f"trainer loop vs naive loop: {args.steps} steps, batch {args.batch_size}, "
        f"max_seq_length {args.max_seq_length}, {args.device}"
    )
    for column in (
        "dataset",
        "variant",
        "precision",
        "useful tokens",
        "tokens incl. padding",
        "padding per useful token",
        "step time s",
        "useful tokens/s",
        "speed-up",
        "val loss",
    ):
        table.add_column(column, justify="left" if column in ("dataset", "variant") else "right")
    for row in rows:
        baseline = next(r for r in rows if r.dataset == row.dataset and r.variant == "naive")
        acc = row.outcome.accounting
        table.add_row(
            row.dataset,
            row.variant,
            row.outcome.precision,
            f"{acc.tokens_seen:,}",
            f"{acc.tokens_with_padding:,}",
            f"{row.padding_per_useful:.2f}",
            f"{row.outcome.train_seconds / max(row.outcome.step, 1):.3f}",
            f"{row.tokens_per_second:,.0f}",
            f"{row.tokens_per_second / baseline.tokens_per_second:.2f}x",
            f"{row.outcome.evaluation.loss:.4f}" if row.outcome.evaluation else "-",
        )
    console.print(table)
    if args.json:
        print(json.dumps(loop_report(args, rows)))
    console.print(
        "naive: pad to max_seq_length, fp32, random batches | agent: dynamic padding, length-grouped "
        "batches, auto precision (bf16/fp16 autocast on GPU; on CPU bf16 where native, else fp32) | agent+fp32 / "
        "agent+bf16: the agent with the other CPU precision forced"
    )


if __name__ == "__main__":
    main()

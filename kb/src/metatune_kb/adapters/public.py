"""Public hyperparameter-optimisation tables as knowledge-base runs (``metatune kb import --public DIR``).

Reads the folder laid out as the team's ``hpo`` data (see its README): NMT-HPO (``nmt_hpo/nmthpo_*.csv``),
NMTLC with its LoRA task (``nmt_hpo/nmtlc_*.jsonl.gz``), DeBERTa-base on MNLI
(``deberta_mnli/*.results.jsonl.gz``) and the PEFT MetaMathQA comparison (``peft_metamathqa/``).
Each row becomes one :class:`KbRun` with ``provenance.source = "public:<table>"`` (the file's stem),
the table's own search space as ``config``, its objective made higher-is-better (perplexity is
negated) and its curve where it has one. The texts of these corpora are absent, so the profiler's
meta-features cannot be computed: ``dataset.descriptors`` carry the task descriptors of
``tasks.csv`` (domain, language pair, training-set size, base model) in their place.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from metatune.knowledge.errors import KbFileError
from metatune.knowledge.records import (
    CurvePoint,
    DatasetInfo,
    Hardware,
    KbRun,
    Provenance,
    RunStatus,
)

LICENCES = {"nmt_hpo": "MIT", "deberta_mnli": "CC BY-SA 4.0", "peft_metamathqa": "Apache-2.0"}
UPSTREAM = {
    "nmt_hpo": "github.com/Este1le/hpo_nmt@7bd0a402b332a6fdea8bdfeabb0271afa5c5be1f (Zhang & Duh)",
    "deberta_mnli": "github.com/nicholaslourie/opda@9529a34b7715e0b32920f630c1f7f7ff6f891060 "
    "(DeBERTa Hyperparameter Tuning Data (c) 2023 by Nicholas Lourie)",
    "peft_metamathqa": "github.com/huggingface/peft@5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40 method_comparison/MetaMathQA",
}
# tasks.csv has no row for the PEFT comparison: its descriptors, from the same README.
PEFT_TASK = "metamathqa_gsm8k"
PEFT_DESCRIPTORS: dict[str, float | str] = {
    "family": "peft_metamathqa",
    "corpus_domain": "MetaMathQA (math word problems) -> GSM8K",
    "lang_pair": "en",
    "base_model": "meta-llama/Llama-3.2-3B",
}


@dataclass
class PublicImport:
    runs: list[KbRun] = field(default_factory=list)
    tables: dict[str, int] = field(default_factory=dict)  # source table -> runs read


def _number(value: str | None) -> float | None:
    if value is None or value.strip() == "":
        return None
    return float(value)


def _int(value: Any) -> int | None:
    return None if value is None or value == "" else int(float(value))


def _as_config_value(value: float | None) -> float | int | None:
    return int(value) if value is not None and value.is_integer() else value


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def task_descriptors(directory: Path) -> dict[str, dict[str, float | str]]:
    """``tasks.csv``: task -> descriptors standing in for meta-features."""
    path = directory / "tasks.csv"
    if not path.is_file():
        raise KbFileError(path, "no tasks.csv: not a public HPO folder")
    result: dict[str, dict[str, float | str]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            descriptors: dict[str, float | str] = {
                key: row[key]
                for key in ("family", "corpus_domain", "lang_pair", "base_model")
                if row.get(key)
            }
            size = _number(row.get("train_size_examples"))
            if size is not None:
                descriptors["train_size_examples"] = size
            result[row["task"]] = descriptors
    return result


def _provenance(folder: str, table: str) -> Provenance:
    return Provenance(
        source=f"public:{table}", note=f"{UPSTREAM[folder]}; licence {LICENCES[folder]}"
    )


def _dataset(
    task: str,
    descriptors: dict[str, dict[str, float | str]],
    folder: str,
    fallback: dict[str, float | str] | None = None,
) -> DatasetInfo:
    found = descriptors.get(task, fallback or {})
    size = found.get("train_size_examples")
    return DatasetInfo(
        name=task,
        descriptors=dict(found),
        licence=LICENCES[folder],
        n_train=int(size) if isinstance(size, float) else None,
    )


# ----------------------------------------------------------------- NMT-HPO
def nmthpo(path: Path, descriptors: dict[str, dict[str, float | str]]) -> list[KbRun]:
    """One trained NMT system per row; objective dev BLEU; no curve."""
    table = path.stem
    runs = []
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            task = row["task"]
            ppl = _number(row["dev_ppl"])
            config = {
                key: _as_config_value(_number(row[key]))
                for key in (
                    "bpe_symbols",
                    "num_layers",
                    "num_embed",
                    "transformer_feed_forward_num_hidden",
                    "transformer_attention_heads",
                    "initial_learning_rate",
                )
            }
            config["config_id"] = int(row["config_id"])
            base_model = str(
                descriptors.get(task, {}).get("base_model", "transformer (from scratch)")
            )
            runs.append(
                KbRun(
                    run_id=f"public:{table}:{row['config_id']}",
                    dataset=_dataset(task, descriptors, "nmt_hpo"),
                    base_model=base_model,
                    task=task,
                    config=config,
                    metric_name="bleu",
                    metric=_number(row["dev_bleu"]),
                    val_loss=math.log(ppl) if ppl and ppl > 0 else None,
                    steps=_int(row["num_updates"]) or 0,
                    planned_steps=_int(row["num_updates"]),
                    provenance=_provenance("nmt_hpo", table),
                )
            )
    return runs


# ----------------------------------------------------------------- NMTLC (scratch and LoRA)
def nmtlc(path: Path, descriptors: dict[str, dict[str, float | str]]) -> list[KbRun]:
    """One run per line, re-runs of a configuration included (the line number tells them apart).
    Scratch runs: objective minus the best dev perplexity; LoRA runs: best dev BLEU. Curves per
    checkpoint (the step is the checkpoint's number: the table has no step counts)."""
    table = path.name.removesuffix(".gz").removesuffix(".jsonl")
    runs = []
    for index, line in enumerate(_read_lines(path)):
        task = line["task"]
        ppl_curve = [float(p) for p in line.get("perplexity_curve") or []]
        bleu_curve = [float(b) for b in line.get("bleu_curve") or []]
        finetune = line.get("task_type") == "finetune"
        n = max(len(ppl_curve), len(bleu_curve))
        curve = [
            CurvePoint(
                step=i + 1,
                fraction=(i + 1) / n,
                val_loss=math.log(ppl_curve[i])
                if i < len(ppl_curve) and ppl_curve[i] > 0
                else None,
                metric=(bleu_curve[i] if i < len(bleu_curve) else None)
                if finetune
                else (-ppl_curve[i] if i < len(ppl_curve) else None),
            )
            for i in range(n)
        ]
        config = dict(line.get("hyperparams") or {})
        config["config_id"] = line["config_id"]
        if finetune:
            config["llm"] = line.get("llm")
            base_model = str(line.get("llm") or line.get("basemodel"))
            metric_name, metric = "bleu", line.get("bleu_optimal")
        else:
            base_model = str(
                descriptors.get(task, {}).get("base_model", "transformer (from scratch)")
            )
            metric_name, metric = "neg_perplexity", -float(line["perplexity_optimal"])
        best_ppl = line.get("perplexity_optimal")
        runs.append(
            KbRun(
                run_id=f"public:{table}:{index}",
                dataset=_dataset(task, descriptors, "nmt_hpo"),
                base_model=base_model,
                task=task,
                config=config,
                metric_name=metric_name,
                metric=metric,
                val_loss=math.log(best_ppl) if best_ppl and best_ppl > 0 else None,
                curve=curve,
                steps=n,
                planned_steps=n,
                provenance=_provenance("nmt_hpo", table),
            )
        )
    return runs


# ----------------------------------------------------------------- DeBERTa on MNLI
DEBERTA_TASK = "deberta-base_mnli"


def deberta(path: Path, descriptors: dict[str, dict[str, float | str]]) -> list[KbRun]:
    """One random-search draw per line; objective the final matched accuracy; curve every 1k steps."""
    table = "deberta_mnli"
    base_model = str(descriptors.get(DEBERTA_TASK, {}).get("base_model", "microsoft/deberta-base"))
    runs = []
    for line in _read_lines(path):
        total = int(line["total_model_steps"])
        matched = line["learning_curves"]["matched"]
        curve = [
            CurvePoint(step=int(step), fraction=min(1.0, step / total), metric=float(acc))
            for step, acc in matched
        ]
        config = {
            key: line[key]
            for key in (
                "num_train_epochs",
                "train_batch_size",
                "learning_rate",
                "warmup_steps",
                "cls_drop_out",
            )
        }
        config["iteration"] = line["iteration"]
        runs.append(
            KbRun(
                run_id=f"public:{table}:{line['iteration']}",
                dataset=_dataset(DEBERTA_TASK, descriptors, "deberta_mnli"),
                base_model=base_model,
                task=DEBERTA_TASK,
                config=config,
                metric_name="accuracy",
                metric=curve[-1].metric if curve else None,
                curve=curve,
                steps=total,
                planned_steps=total,
                provenance=_provenance("deberta_mnli", table),
            )
        )
    return runs


# ----------------------------------------------------------------- PEFT MetaMathQA
def peft_metamathqa(folder: Path) -> list[KbRun]:
    """One PEFT experiment per row of the runs table; objective GSM8K test accuracy; curve of valid
    accuracy and train loss every 250 steps from the upstream result files."""
    table = "peft_metamathqa"
    details: dict[str, dict[str, Any]] = {}
    results = folder / "peft_metamathqa_results.jsonl.gz"
    if results.is_file():
        details = {line["file"]: line for line in _read_lines(results)}
    runs = []
    with (folder / "peft_metamathqa_runs.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            max_steps = _int(row["max_steps"]) or 0
            detail = details.get(row["file"], {})
            metrics = (detail.get("train_info") or {}).get("metrics") or []
            curve = [
                CurvePoint(
                    step=int(m["step"]),
                    fraction=min(1.0, m["step"] / max_steps) if max_steps else 0.0,
                    metric=m.get("valid accuracy"),
                    train_loss=m.get("train loss"),
                )
                for m in metrics
                if "valid accuracy" in m
            ]
            dtype = ((detail.get("run_info") or {}).get("train_config") or {}).get("dtype")
            config: dict[str, Any] = {
                "experiment": row["experiment"],
                "peft_type": row["peft_type"],
                "r": _int(row["r"]),
                "lora_alpha": _int(row["lora_alpha"]),
                "lora_dropout": _number(row["lora_dropout"]),
                "target_modules": json.loads(row["target_modules"])
                if row["target_modules"].startswith("[")
                else row["target_modules"] or None,
                "use_dora": row["use_dora"] == "True",
                "use_rslora": row["use_rslora"] == "True",
                "learning_rate": _number(row["lr"]),
                "weight_decay": _number(row["weight_decay"]),
                "optimizer": row["optimizer"],
                "lr_scheduler": row["lr_scheduler"],
                "batch_size": _int(row["batch_size"]),
                "max_steps": max_steps,
                "trainable_parameters": _int(row["num_trainable_params"]),
            }
            total_s = _number(row["total_time_s"]) or 0.0
            ok = row["status"] == "success"
            runs.append(
                KbRun(
                    run_id=f"public:{table}:{row['experiment']}",
                    dataset=_dataset(PEFT_TASK, {}, "peft_metamathqa", PEFT_DESCRIPTORS),
                    base_model=row["model_id"],
                    task=PEFT_TASK,
                    config=config,
                    status=RunStatus.completed if ok else RunStatus.failed,
                    stop_reason=None if ok else row["status"],
                    metric_name="accuracy",
                    metric=_number(row["test_accuracy"]),
                    curve=curve,
                    steps=max_steps,
                    planned_steps=max_steps,
                    wall_seconds=total_s,
                    train_seconds=_number(row["train_time_s"]),
                    gpu_hours=total_s / 3600.0,
                    hardware=Hardware(
                        device="cuda",
                        gpu_model=row["accelerator"] or None,
                        gpu_count=1,
                        precision=dtype,
                    ),
                    provenance=_provenance("peft_metamathqa", table).model_copy(
                        update={
                            "created_at": datetime.fromisoformat(row["created_at"])
                            if row["created_at"]
                            else None
                        }
                    ),
                )
            )
    return runs


# ----------------------------------------------------------------- the folder
def import_public(directory: Path | str) -> PublicImport:
    """Every table of a public HPO folder that this importer knows, as runs (tables it does not find
    are skipped; a folder without ``tasks.csv`` is refused)."""
    directory = Path(directory)
    descriptors = task_descriptors(directory)
    result = PublicImport()

    def add(table: str, runs: list[KbRun]) -> None:
        result.tables[table] = len(runs)
        result.runs.extend(runs)

    for path in sorted((directory / "nmt_hpo").glob("nmthpo_*.csv")):
        add(path.stem, nmthpo(path, descriptors))
    for path in sorted((directory / "nmt_hpo").glob("nmtlc_*.jsonl.gz")):
        add(path.name.removesuffix(".jsonl.gz"), nmtlc(path, descriptors))
    for path in sorted((directory / "deberta_mnli").glob("*.results.jsonl.gz")):
        add("deberta_mnli", deberta(path, descriptors))
    if (directory / "peft_metamathqa" / "peft_metamathqa_runs.csv").is_file():
        add("peft_metamathqa", peft_metamathqa(directory / "peft_metamathqa"))
    if not result.tables:
        raise KbFileError(
            directory, "no public HPO table found (nmt_hpo/, deberta_mnli/, peft_metamathqa/)"
        )
    return result

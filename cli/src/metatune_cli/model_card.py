"""The Hugging Face Hub model card of a trained adapter: a pure function of what the event log says
about the job (its ``RunCompleted``, the study's ``StudySpec``), the labels the trainer-agent saved
in ``metatune.json`` and the registry's grid region of each datacenter.

The metadata block is what the Hub reads, written by ``huggingface_hub`` (``ModelCardData``):
``base_model`` (a Hub id; left out for a local model directory, which the Hub would refuse),
``library_name: peft``, ``pipeline_tag``, ``tags``, ``datasets``, ``metrics`` and the validation
metrics as a ``model-index``, and ``co2_eq_emissions`` (grams CO2eq, as the run was charged). The
body says what the adapter is, its labels, its metrics beside the majority baseline, its LoRA
configuration, how to load it and what it cost in energy and emissions.

The labels go in a file of their own, ``labels.json`` (``id2label`` and ``label2id`` as
transformers names them), not in ``adapter_config.json`` (PEFT's ``LoraConfig`` drops keys it does
not know, warning that PEFT needs an upgrade) nor in a ``config.json`` (transformers then takes the
folder for a whole model and no longer loads it as an adapter of its base model).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from metatune import units
from metatune.contracts import Hardware, RunCompleted, StudySpec, TaskType
from metatune.display import beside_baseline, trial_outcome
from metatune.labels import LABELS_FILE
from metatune.models import hub_model_id

EMISSIONS_SOURCE = "MetaTune metered energy x grid carbon intensity"
ADAPTER_PATH = "path/to/this/folder"  # what the card's loading example names this folder
PIPELINE_TAG = {
    TaskType.classification: "text-classification",
    TaskType.pair_classification: "text-classification",
    TaskType.causal_lm: "text-generation",
}
_DOES = {
    TaskType.classification: "classifies text",
    TaskType.pair_classification: "classifies pairs of texts",
    TaskType.causal_lm: "generates text (causal language modelling)",
}


def dataset_name(spec: StudySpec | None) -> str | None:
    """The dataset's file name without its suffixes: ``snips_intents_2k`` for the object key
    ``studies/<id>/snips_intents_2k.jsonl``, a path or a URL alike; None where unknown."""
    if spec is None:
        return None
    ref = spec.dataset.ref
    path = urlsplit(ref).path if spec.dataset.kind == "url" else ref
    return PurePosixPath(path).name.split(".")[0] or None


def hardware_used(hardware: Hardware | None) -> str | None:
    """What the agent reported it trained on: ``2 x NVIDIA H100 80GB HBM3``, ``CPU (AMD EPYC
    7763 64-Core Processor)``; None where it reported nothing."""
    if hardware is None:
        return None
    if hardware.device != "cpu" or hardware.gpu_model:
        return f"{max(hardware.gpu_count, 1)} x {hardware.gpu_model or hardware.device}"
    return f"CPU ({hardware.cpu_model})" if hardware.cpu_model else "CPU"


def locations(run: RunCompleted, regions: Mapping[str, str]) -> list[str]:
    """Each datacenter the run spent energy in, in order (a job may migrate), with its grid
    region: ``osl1 (grid region NO)``."""
    names = [h.datacenter for h in run.accounting.hours if h.datacenter] + [run.datacenter]
    return [
        f"{dc} (grid region {regions[dc]})" if dc in regions else dc for dc in dict.fromkeys(names)
    ]


def model_card(
    run: RunCompleted,
    *,
    spec: StudySpec | None = None,
    labels: Sequence[str] = (),
    regions: Mapping[str, str] | None = None,
) -> str:
    """README.md of the adapter ``run`` trained: YAML metadata for the Hub, then the description.

    ``spec``: the study's submission (dataset, base model, task where the run lacks them);
    ``labels``: label names by id (``metatune.json``); ``regions``: datacenter -> grid region."""
    task = run.task or (spec.task if spec else None) or TaskType.classification
    base = run.base_model or (spec.base_model if spec else None)
    hub_id = hub_model_id(base) if base else None
    dataset = dataset_name(spec)
    where = locations(run, regions or {})
    title = f"{_short(hub_id or base or 'base model')} LoRA adapter" + (
        f" for {dataset}" if dataset else ""
    )
    results = _eval_results(run, task, dataset)
    data = ModelCardData(
        base_model=hub_id,
        library_name="peft",
        pipeline_tag=PIPELINE_TAG[task],
        tags=[
            *([f"base_model:adapter:{hub_id}"] if hub_id else []),
            "lora",
            "peft",
            "transformers",
            "metatune",
            "carbon-aware",
        ],
        datasets=[dataset] if dataset else None,
        metrics=[r.metric_type for r in results] or None,
        model_name=title if results else None,
        eval_results=results or None,
        co2_eq_emissions={
            "emissions": run.accounting.emissions_g,
            "source": EMISSIONS_SOURCE,
            "training_type": "fine-tuning",
            "geographical_location": ", ".join(where),
            **({"hardware_used": used} if (used := hardware_used(run.hardware)) else {}),
        },
    )
    sections = [
        f"# {title}",
        _description(run, spec, task, base, hub_id, dataset, where),
        *([_labels(labels)] if labels and task != TaskType.causal_lm else []),
        _results(run, task),
        _configuration(run, task),
        _loading(task, hub_id or base or "BASE_MODEL", bool(labels)),
        _energy(run, where),
    ]
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n")
    return str(card)


def _short(model: str) -> str:
    return model.rstrip("/").rsplit("/", 1)[-1]


def _num(value: float) -> str:
    """A measurement as people read it: 4 significant digits, thousands grouped, no exponent
    above 1e-4."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _eval_results(run: RunCompleted, task: TaskType, dataset: str | None) -> list[EvalResult]:
    """The validation metrics as the Hub's ``model-index`` holds them (its metric ids: accuracy,
    f1, perplexity); none without a dataset name, which every result needs."""
    if dataset is None:
        return []
    m = run.metrics
    found: list[tuple[str, float | None, str, dict[str, str] | None]] = [
        ("accuracy", m.accuracy, "Validation accuracy", None),
        ("f1", m.macro_f1, "Validation macro-F1", {"average": "macro"}),
        ("perplexity", m.perplexity, "Validation perplexity", None),
    ]
    return [
        EvalResult(
            task_type=PIPELINE_TAG[task],
            dataset_type=dataset,
            dataset_name=dataset,
            dataset_split="validation",
            metric_type=metric,
            metric_value=value,
            metric_name=name,
            metric_args=args,
        )
        for metric, value, name, args in found
        if value is not None and math.isfinite(value)
    ]


def _description(
    run: RunCompleted,
    spec: StudySpec | None,
    task: TaskType,
    base: str | None,
    hub_id: str | None,
    dataset: str | None,
    where: list[str],
) -> str:
    model = f"[`{hub_id}`](https://huggingface.co/{hub_id})" if hub_id else f"`{base or '?'}`"
    study = f"{spec.name} (`{run.study_id}`)" if spec and spec.name else f"`{run.study_id}`"
    data = f"the dataset `{dataset}`" if dataset else "its study's dataset"
    text = (
        f"A LoRA adapter ([PEFT](https://github.com/huggingface/peft)) for {model} that "
        f"{_DOES[task]}, fine-tuned on {data} by MetaTune, a "
        f"carbon-aware LoRA fine-tuning platform: job `{run.job_id}` of study {study}, "
        f"finished {run.occurred_at:%Y-%m-%d %H:%M} UTC in {', '.join(where)}."
    )
    if base and hub_id is None:
        text += (
            f"\n\nThe base model `{base}` was a local model directory on the training machine, "
            "not a Hub id: load your copy of it where the example below names it."
        )
    return text


def _labels(labels: Sequence[str]) -> str:
    rows = "\n".join(f"| {i} | {_cell(name)} |" for i, name in enumerate(labels))
    return (
        "## Labels\n\n"
        f"The classifier predicts {len(labels)} labels. `{LABELS_FILE}` holds the same map as "
        "transformers' `id2label` and `label2id`.\n\n"
        f"| id | label |\n|---:|---|\n{rows}"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _results(run: RunCompleted, task: TaskType) -> str:
    m = run.metrics
    rows = []
    if m.accuracy is not None:
        rows.append(("accuracy", beside_baseline(m.accuracy, run.majority_baseline)))
    if m.macro_f1 is not None:
        rows.append(("macro-F1", f"{m.macro_f1:.3f}"))
    if m.perplexity is not None:
        rows.append(("perplexity", f"{m.perplexity:.2f}"))
    rows.append(("loss", f"{m.val_loss:.4f}"))
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    text = (
        f"## Results\n\nOn the held-out validation split:\n\n| metric | value |\n|---|---|\n{table}"
    )
    if task != TaskType.causal_lm and m.accuracy is not None and run.majority_baseline is not None:
        margin = m.accuracy - run.majority_baseline
        verdict = (
            f"beats it by {margin:.3f}"
            if margin > 0
            else "does not beat it: it predicts no better than the most common label"
        )
        text += (
            f"\n\nThe majority baseline ({run.majority_baseline:.3f}) is the accuracy of always "
            f"predicting the training set's most common label; this adapter {verdict}."
        )
    return text


def _configuration(run: RunCompleted, task: TaskType) -> str:
    config = run.config
    targets = (
        ", ".join(f"`{t}`" for t in config.target_modules)
        if config.target_modules
        else "PEFT's default for the architecture (its attention projections)"
    )
    length = (
        f"at most {config.max_steps} optimizer steps"
        if config.max_steps
        else f"{config.epochs:g} epoch(s)"
    )
    planned = f" of {run.planned_steps} planned" if run.planned_steps else ""
    head = (
        "; the new classification head trained in full and saved with the adapter"
        if task != TaskType.causal_lm
        else ""
    )
    outcome = trial_outcome(
        "completed", early_stopped=run.early_stopped, stop_reason=run.stop_reason
    )
    return (
        "## LoRA configuration\n\n"
        f"- rank r = {config.rank}, alpha = {config.alpha:g} (updates scaled by alpha / r = "
        f"{config.alpha / config.rank:g}), dropout {config.dropout:g}\n"
        f"- target modules: {targets}{head}\n"
        f"- AdamW, learning rate {config.learning_rate:g}, {config.lr_schedule.value} schedule "
        f"after {config.warmup_ratio:.0%} warm-up, weight decay {config.weight_decay:g}\n"
        f"- batch {config.batch_size} x {config.grad_accum_steps} accumulation step(s), {length}, "
        f"sequences truncated to {config.max_seq_length} tokens, seed {config.seed}\n"
        f"- trained {run.steps} optimizer steps{planned}: {outcome}"
    )


def _loading(task: TaskType, base: str, has_labels: bool) -> str:
    if task == TaskType.causal_lm:
        code = f"""from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

adapter = "{ADAPTER_PATH}"  # or snapshot_download(repo_id) once it is on the Hub
# is_decoder: as MetaTune trained it (an encoder such as BERT becomes a decoder)
base = AutoModelForCausalLM.from_pretrained("{base}", is_decoder=True)
model = PeftModel.from_pretrained(base, adapter).eval()
tokenizer = AutoTokenizer.from_pretrained("{base}")
inputs = tokenizer("Once upon a time", return_tensors="pt")
print(tokenizer.decode(model.generate(**inputs, max_new_tokens=20)[0]))"""
    else:
        text = '"first text", "second text"' if task == TaskType.pair_classification else '"a text"'
        if has_labels:
            head = f"""import json
from pathlib import Path

from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer

adapter = "{ADAPTER_PATH}"  # or snapshot_download(repo_id) once it is on the Hub
labels = json.loads(Path(adapter, "{LABELS_FILE}").read_text())
id2label = {{int(i): name for i, name in labels["id2label"].items()}}
base = AutoModelForSequenceClassification.from_pretrained(
    "{base}", id2label=id2label, label2id=labels["label2id"]
)"""
        else:
            head = f"""from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer

adapter = "{ADAPTER_PATH}"  # or snapshot_download(repo_id) once it is on the Hub
base = AutoModelForSequenceClassification.from_pretrained(
    "{base}", num_labels=<the number of labels it was trained with>
)"""
        code = f"""{head}
model = PeftModel.from_pretrained(base, adapter).eval()
tokenizer = AutoTokenizer.from_pretrained("{base}")
inputs = tokenizer({text}, return_tensors="pt", truncation=True)
print(model.config.id2label[model(**inputs).logits.argmax(-1).item()])"""
    return (
        "## How to load\n\n"
        "The adapter loads onto its base model with PEFT's `PeftModel.from_pretrained`:\n\n"
        f"```python\n{code}\n```"
    )


def _energy(run: RunCompleted, where: list[str]) -> str:
    a = run.accounting
    rows = [
        (
            "energy",
            f"{units.energy(a.energy_wh)} (IT energy above idle, {a.power_source or 'metered'})",
        ),
        ("emissions", f"{units.mass(a.emissions_g)} CO2eq"),
        ("where", ", ".join(where)),
    ]
    if (used := hardware_used(run.hardware)) is not None:
        precision = run.hardware.precision if run.hardware else None
        rows.append(("hardware", used + (f", {precision}" if precision else "")))
    device = run.hardware.device if run.hardware else None
    rows.append(
        (
            "training time",
            f"{_num(a.wall_seconds)} s, {units.compute_hours(a.gpu_hours, device)}",
        )
    )
    if a.tokens_seen:
        rows.append(("tokens", f"{a.tokens_seen:,} ({a.tokens_with_padding:,} with padding)"))
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    text = (
        "## Energy and emissions\n\n"
        f"| | |\n|---|---|\n{table}\n\n"
        f"Emissions ({EMISSIONS_SOURCE}): each hour's energy, times its datacenter's PUE, times "
        "its grid region's carbon intensity for that hour (the latest forecast when the hour was "
        "charged; `metatune results` re-prices the hours the grid has since observed)."
    )
    if a.hours:
        hours = "\n".join(
            f"| {h.hour:%Y-%m-%d %H:%M} | {h.datacenter or run.datacenter} | {_num(h.energy_wh)} "
            f"| {h.pue:g} | {'-' if h.g_per_kwh is None else _num(h.g_per_kwh)} "
            f"| {_num(h.emissions_g)} |"
            for h in a.hours
        )
        text += (
            "\n\n| hour (UTC) | datacenter | Wh | PUE | gCO2eq/kWh | gCO2eq |\n"
            f"|---|---|---:|---:|---:|---:|\n{hours}"
        )
    return text

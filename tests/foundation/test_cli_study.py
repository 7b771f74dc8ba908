"""`metatune study list|show`, `results`, `adapter download` read the event log; `submit` and `cancel`
refuse bad arguments with one line before anything is published, and with `--json` print one object
naming what they published. Real NATS, the real CLI process."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import nats
import pytest
from nats.js import JetStreamContext

from metatune import contracts as c
from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET, DATASETS_BUCKET, ObjectStore, ensure_streams
from metatune.settings import Settings
from metatune_cli.asyncapi.examples import ACCOUNTING, CONFIG, SPEC
from tests.support.cli import run

from .recorded_study import (
    FAILED,
    OBSERVED_G,
    STUDY,
    TRAINED,
    one_error_line,
    profiled,
    publish,
    study_events,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(module_nats: str, env_for) -> dict[str, str]:
    return env_for(METATUNE_NATS_URL=module_nats, COLUMNS="250")


@pytest.mark.slow  # a CLI process per case
async def test_study_list_show_and_results_tell_the_study_from_the_log(
    module_nats: str, env
) -> None:
    await publish(module_nats, [*study_events(), profiled()])

    listed = run(["study", "list", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    [mine] = [s for s in json.loads(listed.stdout) if s["study_id"] == str(STUDY)]
    assert (
        mine
        | {
            # no more trials requested, and every one ended (2 h and 1 h after NOW, a day early)
            "status": "finished (budget), met its deadline",
            "deadline_met": True,
            "trials_late": 0,
            "deadline_outcome": "met its deadline",
            "trials_requested": 2,
            "trials_completed": 1,
            "trials_early_stopped": 1,
            "trials_failed": 1,
        }
        == mine
    )
    human = run(["study", "list"], env)
    assert (
        human.returncode == 0
        and str(STUDY)[:8] in human.stdout
        and "finished (budget), met its deadline" in human.stdout
    )

    shown = run(["study", "show", str(STUDY), "--json"], env)
    assert shown.returncode == 0, shown.stderr
    details = json.loads(shown.stdout)
    assert (
        details["spec"]["base_model"] == "all-MiniLM-L6-v2"
        and details["stopped"]["reason"] == "budget"
    )
    assert [(t["job_id"], t["status"], t["predicted_metric"]) for t in details["trials"]] == [
        (str(TRAINED), "early-stopped (plateau, step 113)", 0.9),
        (str(FAILED), "failed: out_of_memory", 0.8),
    ]
    human = run(["study", "show", str(STUDY), "--wide"], env)  # every column, lines unwrapped
    assert (
        human.returncode == 0 and str(FAILED) in human.stdout and "OOM at batch 16" in human.stdout
    )
    assert "early-stopped (plateau, step 113)" in human.stdout and "#1" in human.stdout
    assert "accuracy 0.910 (majority 0.600, chance 0.250)" in human.stdout
    assert "each 3 epochs over at most 1,000 rows" in human.stdout  # the study's default budget
    assert f"deadline {SPEC.deadline:%Y-%m-%d %H:%M} UTC, met its deadline" in human.stdout
    assert [t["chance_baseline"] for t in details["trials"]] == [0.25, 0.25]

    results = run(["results", str(STUDY), "--json"], env)
    assert results.returncode == 0, results.stderr
    trained, failed = json.loads(results.stdout)
    assert trained["config"]["rank"] == CONFIG.rank and trained["metrics"]["accuracy"] == 0.91
    assert (trained["energy_wh"], trained["emissions_g"]) == (
        ACCOUNTING.energy_wh,
        ACCOUNTING.emissions_g,
    )
    # realised: the observed first hour at its observed intensity, the second at the forecast's
    first, second = ACCOUNTING.hours
    assert trained["realised_emissions_g"] == pytest.approx(
        first.energy_wh / 1000 * first.pue * OBSERVED_G
        + second.energy_wh / 1000 * second.pue * second.g_per_kwh
    )
    assert (trained["realised_hours"], trained["forecast_priced_hours"]) == (1, 1)
    assert failed["metrics"] is None and failed["error"] == "OOM at batch 16"
    assert trained["status"] == "early-stopped (plateau, step 113)"
    human = run(["results", str(STUDY), "--wide"], env)
    assert human.returncode == 0 and "0.91" in human.stdout and "38.5" in human.stdout
    assert "early-stopped (plateau, step 113)" in human.stdout
    assert (trained["majority_baseline"], trained["chance_baseline"]) == (0.6, 0.25)
    assert "0.910 (majority 0.600, chance 0.250)" in human.stdout
    assert "1/2" in human.stdout and "forecast intensity" in human.stdout

    one_error_line(run(["study", "show", "not-a-study"], env), 2, "'not-a-study' is not a study id")
    by_prefix = run(["study", "show", str(STUDY)[:8], "--json"], env)  # as `study list` shows it
    assert by_prefix.returncode == 0 and json.loads(by_prefix.stdout)["study_id"] == str(STUDY)
    one_error_line(run(["study", "show", "0000"], env), 1, "no study with an id starting '0000'")
    one_error_line(run(["results", str(uuid4())], env), 1, "no study")


@pytest.mark.slow  # loads the model through peft
async def test_adapter_download_gives_a_hub_ready_folder_peft_loads(
    module_nats: str, env, tmp_path: Path
) -> None:
    import torch
    from huggingface_hub import metadata_load
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForSequenceClassification

    from metatune.models import EMBEDDED_HUB_ID, embedded_model_dir
    from metatune_cli.model_card import ADAPTER_PATH, EMISSIONS_SOURCE
    from metatune_trainer_agent.adapters.adapter_archive import pack_adapter
    from metatune_trainer_agent.adapters.base_model import load_model

    base = str(embedded_model_dir())
    torch.manual_seed(0)
    trained = load_model(base, c.TaskType.classification, CONFIG, num_labels=2, pad_token_id=0)
    nc = await nats.connect(module_nats)
    js = nc.jetstream()
    await ensure_streams(js, Settings(nats_url=module_nats))
    await ObjectStore(js).put_bytes(
        ADAPTERS_BUCKET, f"{TRAINED}.tar", pack_adapter(trained, {"labels": ["neg", "pos"]})
    )
    await nc.close()
    await publish(module_nats, study_events())

    out = tmp_path / "adapter"
    result = run(["adapter", "download", str(TRAINED), "--out", str(out), "--json"], env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"adapter_config.json", "README.md", "labels.json"} <= set(report["files"])
    assert report["metadata"] == {"labels": ["neg", "pos"]} and report["labels"] == ["neg", "pos"]
    loaded = PeftModel.from_pretrained(
        AutoModelForSequenceClassification.from_pretrained(base, num_labels=2), out
    )
    want, got = trained.state_dict(), loaded.state_dict()
    lora = [k for k in want if "lora_" in k or "modules_to_save" in k]
    assert lora and all(torch.equal(want[k], got[k]) for k in lora)

    # Hub-ready: the card's metadata (PEFT's template, naming this machine's path, replaced)
    meta = metadata_load(out / "README.md")
    assert meta is not None and meta["base_model"] == EMBEDDED_HUB_ID
    assert meta["library_name"] == "peft" and meta["pipeline_tag"] == "text-classification"
    assert meta["co2_eq_emissions"] == {
        "emissions": ACCOUNTING.emissions_g,
        "source": EMISSIONS_SOURCE,
        "training_type": "fine-tuning",
        "geographical_location": "osl1 (grid region NO)",
        "hardware_used": "CPU (Test CPU 9000)",
    }
    accuracy = meta["model-index"][0]["results"][0]["metrics"][0]
    assert (accuracy["type"], accuracy["value"]) == ("accuracy", 0.91)
    assert json.loads((out / "labels.json").read_text()) == {
        "id2label": {"0": "neg", "1": "pos"},
        "label2id": {"neg": 0, "pos": 1},
    }
    # PEFT's config names the base on the Hub, not the agent's folder, and still loads quietly
    # (warnings are errors here)
    assert PeftConfig.from_pretrained(str(out)).base_model_name_or_path == EMBEDDED_HUB_ID
    # the card's own loading example works: the Hub id swapped for the embedded copy of it
    card = (out / "README.md").read_text()
    example = card.split("```python\n", 1)[1].split("```", 1)[0]
    names: dict[str, object] = {}
    exec(example.replace(EMBEDDED_HUB_ID, base).replace(ADAPTER_PATH, str(out)), names)
    example_model = names["model"]
    assert isinstance(example_model, PeftModel)
    assert example_model.config.id2label == {0: "neg", 1: "pos"}
    got = example_model.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in lora)
    # examples/load_adapter.py, the README's command, loads it as well and classifies alike
    texts = ["a fine film", "a dull film"]
    script = REPO / "examples" / "load_adapter.py"
    loaded_by_script = subprocess.run(
        [sys.executable, str(script), str(out), *texts], capture_output=True, text=True, timeout=600
    )
    assert loaded_by_script.returncode == 0, loaded_by_script.stderr
    assert "Warning" not in loaded_by_script.stderr  # peft's FutureWarning from transformers
    tokenizer = names["tokenizer"]
    with torch.no_grad():
        predicted = [
            example_model(**tokenizer(t, return_tensors="pt", truncation=True)).logits.argmax(-1)
            for t in texts
        ]
    assert loaded_by_script.stdout.splitlines() == [
        f"{example_model.config.id2label[p.item()]}\t{t}"
        for p, t in zip(predicted, texts, strict=True)
    ]
    # by the job id's first characters, as a narrow terminal shows `results`' job column
    again = tmp_path / "again"
    human = run(["adapter", "download", str(TRAINED)[:8], "--out", str(again)], env)
    assert human.returncode == 0, human.stderr
    assert (again / "adapter_model.safetensors").read_bytes() == (
        out / "adapter_model.safetensors"
    ).read_bytes()
    assert "README.md" in human.stdout and "hf upload" in human.stdout

    one_error_line(
        run(["adapter", "download", str(TRAINED), "--out", str(out)], env),
        2,
        "not an empty directory",
    )
    one_error_line(
        run(["adapter", "download", str(FAILED), "--out", str(tmp_path / "x")], env),
        1,
        "has no adapter",
        "failed: out_of_memory",
    )
    one_error_line(
        run(["adapter", "download", str(uuid4()), "--out", str(tmp_path / "y")], env), 1, "no job"
    )
    one_error_line(
        run(["adapter", "download", "0000", "--out", str(tmp_path / "z")], env),
        1,
        "no job with an id starting '0000'",
    )


@pytest.mark.slow  # fourteen CLI processes
async def test_submit_and_cancel_refuse_bad_arguments_before_publishing(
    submitter: tuple[dict[str, str], JetStreamContext], private_nats: str, tmp_path: Path
) -> None:
    env, js = submitter
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello", "label": "a"}\n')
    submit = ["submit", str(data)]
    cases = [
        ([*submit, "--home-datacenter", "xyz9"], 2, "unknown datacenter 'xyz9'", "fra1"),
        ([*submit, "--base-model", "no-such-model"], 2, "unknown base model 'no-such-model'"),
        ([*submit, "--webhook", "not a url"], 2, "invalid submission: webhook_url"),
        ([*submit, "--deadline", "tomorrow"], 2, "'tomorrow'", "24h"),
        (
            [*submit, "--task", "causal_lm", "--label-column", "label"],
            2,
            "causal_lm study has no label column",
        ),
        (
            [*submit, "--task", "bogus"],
            2,
            "'--task'",
            "'bogus' is not one of",
        ),  # typer's own usage errors
        ([*submit, "--trials", "0"], 2, "'--trials'", "submit --help"),
        ([*submit, "--gpus-per-trial", "999"], 2, "'--gpus-per-trial'", "submit --help"),
        (
            [*submit, "--region-group", "EU", "--home-datacenter", "dfw1"],
            2,
            "--home-datacenter dfw1 is outside --region-group EU",
        ),
        ([*submit, "--gpus-per-trial", "64"], 2, "--gpus-per-trial 64: the largest datacenter has"),
        (["cancel", "12345"], 2, "'12345' is not a job id"),
        (["cancel", str(uuid4())], 1, "no job"),
    ]
    for args, code, *words in cases:
        one_error_line(run(args, env), code, *words)
    assert (await js.stream_info("METATUNE")).state.messages == 0  # nothing published
    assert (await js.stream_info(f"OBJ_{DATASETS_BUCKET}")).state.messages == 0  # nothing uploaded

    # valid, with --json: one object on stdout naming what was published
    ready = run(["bus-init", "--json"], env)
    assert ready.returncode == 0, ready.stderr
    assert json.loads(ready.stdout) | {"ready": True, "clock": "real"} == json.loads(ready.stdout)
    submitted = run([*submit, "--json"], env)
    assert submitted.returncode == 0, submitted.stderr
    receipt = json.loads(submitted.stdout)
    assert receipt["dataset"] == {
        "kind": "object",
        "ref": f"studies/{receipt['study_id']}/d.jsonl",
        "format": None,
        "size_bytes": data.stat().st_size,
        "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
    }
    logged = json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)
    assert (logged["event_id"], logged["study_id"]) == (receipt["event_id"], receipt["study_id"])
    await publish(private_nats, study_events()[1:2])  # the job TRAINED requested
    cancelled = run(["cancel", str(TRAINED), "--reason", "not needed", "--json"], env)
    assert cancelled.returncode == 0, cancelled.stderr
    receipt = json.loads(cancelled.stdout)
    logged = json.loads((await js.get_last_msg("METATUNE", subjects.JOBS_CANCELLED)).data)
    assert receipt == {
        "event_id": logged["event_id"],
        "job_id": str(TRAINED),
        "reason": "not needed",
    }

"""Study files: `metatune submit study.yaml` submits what the file says, flags override it, and a
bad file is one line naming the field before anything is uploaded. The published JSON Schema is
the model's. Real NATS, the real CLI process."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from metatune import subjects
from metatune_cli.study_file import (
    StudyFileError,
    is_study_file,
    read_study_file,
    study_file_schema,
)
from tests.support.cli import run

from .recorded_study import one_error_line, stored

REPO = Path(__file__).resolve().parents[2]


def test_the_published_schema_is_the_model_s() -> None:
    committed = (REPO / "docs" / "study.schema.json").read_text()
    assert committed == study_file_schema(), (
        "docs/study.schema.json is stale: run "
        "`.venv/bin/python -m metatune_cli.study_file > docs/study.schema.json`"
    )


def test_the_example_study_file_validates_and_names_a_shipped_dataset() -> None:
    example = REPO / "examples" / "study.yaml"
    study = read_study_file(example)
    path = study.dataset_path(example)
    assert path is not None and path.is_file()
    assert (study.name, study.tags, study.trials, study.carbon_preference) == (
        "snips-intents",
        ["nlp", "intents"],
        3,
        "balanced",
    )


def test_the_readme_s_study_file_validates(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    [block] = re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)
    snippet = tmp_path / "study.yaml"
    snippet.write_text("\n".join(line.removeprefix("  ") for line in block.splitlines()))
    assert read_study_file(snippet).name == "snips-intents"


@pytest.mark.parametrize(
    "text, words",
    [
        ("dataset: d.jsonl\ntrials: 0\n", ["trials:", "greater than or equal to 1"]),
        ("dataset: d.jsonl\ncolour: blue\n", ["colour: unknown field"]),
        ("dataset: d.jsonl\ncarbon_preference: cheapest\n", ["carbon_preference:"]),
        ("name: no dataset\n", ["dataset: Field required"]),
        ("dataset: [d.jsonl\n", ["not valid YAML at line"]),
        ("- just\n- a list\n", ["expected a mapping"]),
        ("dataset: d.jsonl\ndeadline: tomorrow\n", ["deadline: 'tomorrow': use 24h"]),
        ("dataset: d.jsonl\ndeadline: 2026-12-01 12:00:00\n", ["deadline:", "no time zone"]),
        ("dataset: d.jsonl\ndeadline: 2026-12-01\n", ["deadline:", "is a date"]),
        ("dataset: d.jsonl\ntrials: 3\ntrials: 4\n", ["trials: given twice (line 3)"]),
        ("dataset: d.jsonl\nwebhook: not a url\n", ["webhook:", "URL"]),
        ("dataset: d.jsonl\ntags: [nlp, 'two words']\n", ["tags.1:", "pattern"]),
        ("dataset: d.jsonl\nname: ''\n", ["name:", "at least 1 character"]),
        ("dataset: {key: d.jsonl}\n", ["dataset.object_key: Field required"]),
        ("dataset: 5\n", ["dataset: a file path or {object_key: KEY}"]),
        (
            "dataset: d.jsonl\ntask: causal_lm\nlabel_column: label\n",
            ["label_column: a causal_lm study has no label column"],
        ),
    ],
    ids=[
        "out-of-range",
        "unknown-field",
        "bad-enum",
        "missing-dataset",
        "bad-yaml",
        "a-list",
        "bad-deadline",
        "deadline-without-zone",
        "deadline-a-date",
        "duplicate-key",
        "bad-webhook",
        "bad-tag",
        "empty-name",
        "object-without-key",
        "dataset-a-number",
        "lm-with-label",
    ],
)
def test_a_bad_study_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(StudyFileError) as caught:
        read_study_file(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    assert all(w in message for w in words), message


def test_a_yaml_time_and_an_object_key_are_read_as_meant(tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text("dataset: {object_key: studies/x/d.jsonl}\ndeadline: 2026-12-01T18:00:00Z\n")
    study = read_study_file(path)
    assert (study.object_key(), study.dataset_path(path)) == ("studies/x/d.jsonl", None)
    assert study.deadline == "2026-12-01T18:00:00+00:00"


def test_a_json_study_file_is_told_from_a_json_lines_dataset(tmp_path: Path) -> None:
    study = tmp_path / "study.json"
    study.write_text('{\n  "dataset": "d.jsonl",\n  "trials": 2\n}\n')
    rows = tmp_path / "rows.json"
    rows.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n')
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "dataset": "d.jsonl",\n}\n')
    assert [is_study_file(p) for p in (study, rows, broken, tmp_path / "d.csv")] == [
        True,
        False,
        True,
        False,
    ]
    assert read_study_file(study).trials == 2
    with pytest.raises(StudyFileError, match=r"broken.json: not valid JSON at line 3"):
        read_study_file(broken)


@pytest.mark.slow  # a CLI process per case
async def test_submit_a_study_file_with_flags_overriding_it(
    submitter: tuple[dict[str, str], JetStreamContext], tmp_path: Path
) -> None:
    env, js = submitter
    (tmp_path / "data").mkdir()
    data = tmp_path / "data" / "d.jsonl"
    data.write_text('{"text": "hello", "label": "a"}\n')
    study = tmp_path / "study.yaml"

    # refused before anything is published or uploaded, in one line naming file and field
    refused = [
        ("trials: 99\n", "study.yaml: trials: Input should be less than or equal to 50"),
        ("deadline: 2026-12-01 12:00\n", "study.yaml: deadline:", "no time zone"),
        ("home_datacenter: xyz9\n", "study.yaml: home_datacenter: unknown datacenter 'xyz9'"),
        ("base_model: no-such-model\n", "study.yaml: base_model: unknown base model"),
        ("gpus_per_trial: 64\n", "study.yaml: gpus_per_trial: 64: the largest datacenter"),
        (
            "region_group: NA\nhome_datacenter: fra1\n",
            "study.yaml: home_datacenter: fra1 is outside region_group NA",
        ),
        ("colour: blue\n", "study.yaml: colour: unknown field"),
        ("budget: {epochs: 2, max_steps: 9}\n", "study.yaml: budget:", "not both"),
        ("budget: {max_train_rows: 3}\n", "study.yaml: budget.max_train_rows:", "10"),
    ]
    for body, *words in refused:
        study.write_text(f"dataset: data/d.jsonl\n{body}")
        one_error_line(run(["submit", str(study)], env), 2, *words)
    study.write_text("dataset: data/missing.jsonl\n")
    one_error_line(run(["submit", str(study)], env), 2, "study.yaml: dataset:", "missing.jsonl")
    study.write_text("dataset: [data/d.jsonl\n")
    one_error_line(run(["submit", str(study)], env), 2, "study.yaml: not valid YAML")
    study.write_text("dataset: data/d.jsonl\nregion_group: NA\n")  # the flag's home is not in NA
    one_error_line(
        run(["submit", str(study), "--home-datacenter", "fra1"], env),
        2,
        "study.yaml: region_group: --home-datacenter fra1 is outside region_group NA",
    )
    study.write_text("dataset: {object_key: studies/none/d.jsonl}\n")
    one_error_line(
        run(["submit", str(study)], env),
        2,
        "study.yaml: dataset.object_key:",
        "is not in the object store",
    )
    both = run(["submit", str(data), "--epochs", "2", "--max-steps", "9"], env)
    one_error_line(both, 2, "invalid budget", "not both")
    assert await stored(js) == (0, 0)

    # the file's values, three flags overriding theirs, the defaults for what both leave out
    study.write_text(
        "name: team-study\ntags: [nlp, q4]\ndataset: data/d.jsonl\ntrials: 4\ndeadline: 3d\n"
        "carbon_preference: balanced\nregion_group: EU\nhome_datacenter: fra1\n"
        "label_column: label\nwebhook: https://ci.example.org/hooks/metatune\n"
        "budget: {max_steps: 300, max_train_rows: 5000}\n"
    )
    before = datetime.now(UTC)
    submitted = run(
        ["submit", str(study), "--trials", "2", "--tag", "urgent", "--epochs", "2", "--json"], env
    )
    assert submitted.returncode == 0, submitted.stderr
    receipt = json.loads(submitted.stdout)
    assert receipt["dataset"]["ref"] == f"studies/{receipt['study_id']}/d.jsonl"
    logged = json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)
    assert logged["study_id"] == receipt["study_id"]
    spec = logged["spec"]
    assert (spec["trials"], spec["tags"]) == (2, ["urgent"])  # the flags
    # --epochs replaces the file's step budget; its row cap stays
    assert spec["budget"] == {"epochs": 2.0, "max_steps": None, "max_train_rows": 5000}
    assert {k: spec[k] for k in ("name", "carbon_preference", "region_group")} == {
        "name": "team-study",
        "carbon_preference": "balanced",
        "region_group": "EU",
    }
    assert (spec["home_datacenter"], spec["label_column"]) == ("fra1", "label")
    assert spec["webhook_url"] == "https://ci.example.org/hooks/metatune"
    deadline = datetime.fromisoformat(spec["deadline"])
    assert before + timedelta(days=3) <= deadline <= datetime.now(UTC) + timedelta(days=3)
    assert (spec["base_model"], spec["task"], spec["gpus_per_trial"]) == (
        "all-MiniLM-L6-v2",  # the command's defaults: the file left them out
        "classification",
        1,
    )
    assert spec["dataset"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()

    # a JSON study file naming the dataset just uploaded by its key: checked, not uploaded
    uploaded = (await stored(js))[1]
    again = tmp_path / "again.json"
    again.write_text(
        json.dumps({"dataset": {"object_key": spec["dataset"]["ref"]}, "tags": ["nlp"]})
    )
    resubmitted = run(["submit", str(again), "--json"], env)
    assert resubmitted.returncode == 0, resubmitted.stderr
    second = json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)
    assert second["study_id"] == json.loads(resubmitted.stdout)["study_id"]
    assert second["spec"]["dataset"] | {"format": None} == spec["dataset"]
    assert (second["spec"]["name"], second["spec"]["tags"]) == ("d", ["nlp"])
    assert second["spec"]["budget"] == {"epochs": 3.0, "max_steps": None, "max_train_rows": 1000}
    assert (await stored(js))[1] == uploaded

    # the tags select studies
    listed = run(["study", "list", "--tag", "nlp", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    assert [(s["study_id"], s["tags"]) for s in json.loads(listed.stdout)] == [
        (second["study_id"], ["nlp"])
    ]
    listed = run(["study", "list", "--tag", "urgent", "--tag", "nlp"], env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "no studies tagged nlp, urgent in the event log"
    shown = run(["study", "show", receipt["study_id"]], {**env, "COLUMNS": "200"})
    assert shown.returncode == 0 and "tags urgent" in shown.stdout, shown.stderr


async def test_a_flag_only_submission_of_json_lines_takes_tags(
    submitter: tuple[dict[str, str], JetStreamContext], tmp_path: Path
) -> None:
    env, js = submitter
    data = tmp_path / "rows.json"  # JSON lines under .json: a dataset, not a study file
    data.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "y"}\n')
    submitted = run(["submit", str(data), "--tag", "nlp", "--tag", "nlp", "--json"], env)
    assert submitted.returncode == 0, submitted.stderr
    spec = json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)["spec"]
    assert (spec["name"], spec["tags"], spec["trials"]) == ("rows", ["nlp"], 3)

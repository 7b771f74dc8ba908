"""Study files: `metatune submit study.yaml` submits what the file says, flags override it, and a
bad file is one line naming the field before anything is uploaded. The published JSON Schema is
the model's. Real NATS, the real CLI process."""

from __future__ import annotations

import json
from pathlib import Path

import nats
import pytest

from metatune import subjects
from metatune.bus import DATASETS_BUCKET, ensure_streams
from metatune.settings import Settings
from metatune.study_file import StudyFileError, read_study_file, study_file_schema
from tests.support.cli import run

from .test_cli_study import one_error_line

REPO = Path(__file__).resolve().parents[2]


def test_the_published_schema_is_the_model_s() -> None:
    assert (REPO / "docs" / "study.schema.json").read_text() == study_file_schema()


def test_the_example_study_file_validates_and_names_a_shipped_dataset() -> None:
    example = REPO / "examples" / "study.yaml"
    study = read_study_file(example)
    assert study.dataset_path(example).is_file()
    assert (study.name, study.trials, study.carbon_preference) == ("snips-intents", 3, "balanced")


@pytest.mark.parametrize(
    "text, words",
    [
        ("dataset: d.jsonl\ntrials: 0\n", ["trials:", "greater than or equal to 1"]),
        ("dataset: d.jsonl\ncolour: blue\n", ["colour: unknown field"]),
        ("dataset: d.jsonl\ncarbon_preference: cheapest\n", ["carbon_preference:"]),
        ("name: no dataset\n", ["dataset: Field required"]),
        ("dataset: [d.jsonl\n", ["not valid YAML at line"]),
        ("- just\n- a list\n", ["expected a mapping"]),
    ],
    ids=["out-of-range", "unknown-field", "bad-enum", "missing-dataset", "bad-yaml", "a-list"],
)
def test_a_bad_study_file_is_one_line_naming_the_field(
    tmp_path: Path, text: str, words: list[str]
) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(StudyFileError) as caught:
        read_study_file(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    assert all(w in message for w in words), message


async def test_submit_a_study_file_with_a_flag_overriding_it(
    private_nats: str, env_for, tmp_path: Path
) -> None:
    env = env_for(METATUNE_NATS_URL=private_nats, HF_HUB_OFFLINE="1")
    nc = await nats.connect(private_nats)
    try:
        js = nc.jetstream()
        await ensure_streams(js, Settings(nats_url=private_nats))
        (tmp_path / "data").mkdir()
        data = tmp_path / "data" / "d.jsonl"
        data.write_text('{"text": "hello", "label": "a"}\n')
        study = tmp_path / "study.yaml"

        # refused before anything is uploaded: a field that does not validate, a missing dataset
        study.write_text("dataset: data/d.jsonl\ntrials: 99\n")
        one_error_line(run(["submit", str(study)], env), 2, "study.yaml: trials:")
        study.write_text("dataset: data/missing.jsonl\n")
        one_error_line(run(["submit", str(study)], env), 2, "dataset:", "missing.jsonl")
        study.write_text("dataset: data/d.jsonl\nhome_datacenter: xyz9\n")
        one_error_line(run(["submit", str(study)], env), 2, "unknown datacenter 'xyz9'")
        assert (await js.stream_info(f"OBJ_{DATASETS_BUCKET}")).state.messages == 0

        study.write_text(
            "name: team-study\ndataset: data/d.jsonl\ntrials: 4\ndeadline: 3d\n"
            "carbon_preference: balanced\nregion_group: EU\nlabel_column: label\n"
        )
        submitted = run(["submit", str(study), "--trials", "2", "--json"], env)
        assert submitted.returncode == 0, submitted.stderr
        receipt = json.loads(submitted.stdout)
        assert receipt["dataset"]["ref"] == f"studies/{receipt['study_id']}/d.jsonl"
        logged = json.loads((await js.get_last_msg("METATUNE", subjects.DATASETS_SUBMITTED)).data)
        spec = logged["spec"]
        assert spec["trials"] == 2  # the flag
        assert (spec["name"], spec["carbon_preference"], spec["region_group"]) == (
            "team-study",
            "balanced",
            "EU",
        )
        assert (spec["label_column"], spec["base_model"], spec["task"]) == (
            "label",
            "all-MiniLM-L6-v2",  # the command's default: the file left it out
            "classification",
        )
    finally:
        await nc.close()

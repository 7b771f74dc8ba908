"""Each bad input fails with a typed reason, before any compute is spent where it can be."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from pydantic import ValidationError

from metatune.contracts import AssignmentAction, FailureReason, LoraConfig, TaskType
from metatune.models import UnknownBaseModel
from metatune_trainer_agent.adapters.training import run_training
from metatune_trainer_agent.domain.assignments import parse_assignment
from metatune_trainer_agent.domain.errors import (
    EmptySplit,
    InvalidTrainingConfig,
    TrainingDatasetNotFound,
    TrainingUnknownBaseModel,
)
from metatune_trainer_agent.domain.request import (
    TrainingRequest,
    TrainOptions,
    apply_overrides,
    validate_config,
)
from tests.support.builders import FAST_SITE, request_for


@pytest.mark.parametrize(
    "values",
    [{"rank": 0}, {"learning_rate": -1e-4}, {"dropout": 1.5}, {"epochs": None, "max_steps": None}],
)
def test_out_of_range_configs_are_invalid_config(values: dict) -> None:
    with pytest.raises(InvalidTrainingConfig) as info:
        validate_config({**LoraConfig().model_dump(), **values})
    assert info.value.reason == FailureReason.invalid_config


def test_cli_style_overrides_use_aliases_and_reject_unknown_keys() -> None:
    config, options = apply_overrides(
        LoraConfig(),
        TrainOptions(),
        {"r": "4", "lr": "1e-3", "target_modules": "query,key", "precision": "fp32"},
    )
    assert (config.rank, config.learning_rate, config.target_modules, options.precision) == (
        4,
        1e-3,
        ["query", "key"],
        "fp32",
    )
    with pytest.raises(InvalidTrainingConfig, match="unknown setting 'rnak'"):
        apply_overrides(LoraConfig(), TrainOptions(), {"rnak": "4"})
    with pytest.raises(InvalidTrainingConfig, match="rank"):
        apply_overrides(LoraConfig(), TrainOptions(), {"rank": "0"})


def test_unknown_base_model_fails_before_training(intents_binary: Path) -> None:
    request = request_for(intents_binary).model_copy(
        update={"base_model": "no-such-model-anywhere"}
    )
    with pytest.raises(TrainingUnknownBaseModel) as info:
        run_training(request, site=FAST_SITE)
    assert info.value.reason == FailureReason.unknown_base_model
    assert isinstance(info.value, UnknownBaseModel)  # the one name callers catch


def test_missing_dataset_and_empty_split(tmp_path: Path) -> None:
    with pytest.raises(TrainingDatasetNotFound) as missing:
        run_training(request_for(tmp_path / "absent.jsonl"), site=FAST_SITE)
    assert missing.value.reason == FailureReason.dataset_missing
    only_test = tmp_path / "test-only.jsonl"
    only_test.write_text(
        '{"text": "a", "label": "x", "split": "test"}\n{"text": "b", "label": "y", "split": "test"}\n'
    )
    with pytest.raises(EmptySplit) as empty:
        run_training(request_for(only_test), site=FAST_SITE)
    assert empty.value.reason == FailureReason.empty_split


def test_a_single_label_dataset_cannot_train_a_classifier(tmp_path: Path) -> None:
    path = tmp_path / "one-label.jsonl"
    path.write_text("".join(f'{{"text": "row {i}", "label": "same"}}\n' for i in range(20)))
    with pytest.raises(InvalidTrainingConfig, match="at least 2 labels"):
        run_training(
            TrainingRequest(
                dataset=path, task=TaskType.classification, base_model="all-MiniLM-L6-v2"
            ),
            site=FAST_SITE,
        )


def assignment_payload(**config: object) -> dict:
    return {
        "occurred_at": datetime.now(UTC).isoformat(),
        "job_id": str(uuid4()),
        "study_id": str(uuid4()),
        "datacenter": "fra1",
        "action": "start",
        "plan_version": 1,
        "config": {**LoraConfig().model_dump(mode="json"), **config},
    }


def test_an_assignment_with_a_bad_config_still_names_its_job() -> None:
    payload = assignment_payload(rank=0, learning_rate=-0.1)
    parsed = parse_assignment(payload)
    assert str(parsed.assignment.job_id) == payload["job_id"]
    assert parsed.assignment.action == AssignmentAction.start and parsed.assignment.config is None
    assert "config.rank" in parsed.config_error and "config.learning_rate" in parsed.config_error
    assert parse_assignment(assignment_payload()).config_error is None


def test_an_assignment_that_cannot_name_its_job_is_an_invalid_message() -> None:
    payload = assignment_payload(rank=0)
    del payload["job_id"]
    with pytest.raises(ValidationError):
        parse_assignment(payload)

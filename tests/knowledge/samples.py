"""Knowledge-base runs for the tests, built like the seed build's and the flywheel's."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from metatune.contracts import LoraConfig
from metatune.knowledge import CurvePoint, DatasetInfo, Hardware, KbRun, Provenance, RunStatus
from tests.support.samples import FEATURES as SUPPORT_FEATURES

FEATURES = SUPPORT_FEATURES.model_copy(
    update={"n_examples": 200, "imbalance_ratio": 1.2, "sample_size": 200}
)


def run(
    run_id: str,
    *,
    dataset: str = "sst2",
    metric: float = 0.8,
    baseline: float | None = 0.55,
    rank: int = 8,
    source: str = "seed-kb",
    status: RunStatus = RunStatus.completed,
    study_id: UUID | None = None,
    base_model: str = "all-MiniLM-L6-v2",
    task: str = "classification",
) -> KbRun:
    return KbRun(
        run_id=run_id,
        study_id=study_id,
        dataset=DatasetInfo(name=dataset, features=FEATURES, licence="CC0", n_train=200, n_val=50),
        base_model=base_model,
        task=task,
        config=LoraConfig(rank=rank, learning_rate=1e-3).model_dump(mode="json"),
        status=status,
        stop_reason="plateau" if status is RunStatus.early_stopped else None,
        metric_name="accuracy",
        metric=metric if status is not RunStatus.failed else None,
        val_loss=0.4,
        majority_baseline=baseline,
        curve=[
            CurvePoint(step=0, fraction=0.0, val_loss=0.7, metric=0.5),
            CurvePoint(step=10, fraction=1.0, val_loss=0.4, metric=metric, train_loss=0.35),
        ],
        steps=10,
        planned_steps=10,
        tokens=1000,
        tokens_with_padding=1300,
        wall_seconds=12.5,
        train_seconds=9.0,
        energy_wh=0.3,
        hardware=Hardware(device="cpu", cpu_model="test cpu", precision="fp32"),
        seed=13,
        provenance=Provenance(
            source=source,
            code_version="abc123",
            machine="test",
            created_at=datetime(2026, 1, 1, tzinfo=UTC),
        ),
    )

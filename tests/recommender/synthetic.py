"""Synthetic knowledge bases with a known optimum, for the recommender's tests."""

from __future__ import annotations

import numpy as np
from scipy.stats import qmc

from metatune.contracts import MetaFeatures
from metatune.knowledge.records import DatasetInfo, Hardware, KbRun, Provenance
from metatune.knowledge.space import DIMENSIONS, Budget, decode, encode
from metatune_recommender.domain.history import Task
from tests.support.samples import FEATURES

OPTIMUM = np.array(
    [0.7, 0.4]
)  # (learning-rate, rank) coordinates of encode() where every task peaks


def score(config: dict, shift: float = 0.0) -> float:
    """A smooth objective over the LoRA space, best at OPTIMUM (+ a task's shift of the learning rate)."""
    x = np.array(encode(config)[:2])
    return float(0.9 - 0.8 * ((x[0] - OPTIMUM[0] - shift) ** 2 + 0.5 * (x[1] - OPTIMUM[1]) ** 2))


def design(n: int, seed: int) -> list[dict]:
    points = qmc.Sobol(d=len(DIMENSIONS), scramble=True, seed=seed).random(n)
    return [
        {
            k: v
            for k, v in decode(p, budget=Budget(max_steps=64)).model_dump(mode="json").items()
            if k != "seed"
        }
        for p in points
    ]


def features(n_examples: int) -> MetaFeatures:
    return FEATURES.model_copy(update={"n_examples": n_examples})


def kb_runs(
    datasets: int = 4, per_dataset: int = 16, base_model: str = "all-MiniLM-L6-v2"
) -> list[KbRun]:
    runs = []
    for d in range(datasets):
        for i, config in enumerate(design(per_dataset, seed=d)):
            runs.append(
                KbRun(
                    run_id=f"syn:{d}:{i}",
                    dataset=DatasetInfo(name=f"syn{d}", features=features(1000 + 500 * d)),
                    base_model=base_model,
                    task="classification",
                    config=config,
                    metric_name="accuracy",
                    metric=score(config),
                    tokens_with_padding=10_000,
                    train_seconds=5.0,
                    wall_seconds=8.0,
                    energy_wh=0.2,
                    hardware=Hardware(device="cpu"),
                    provenance=Provenance(source="seed-kb"),
                )
            )
    return runs


def family(tasks: int, per_task: int, seed: int) -> list[Task]:
    """Related tasks: one shape, the optimum's learning rate shifted with the task's (log) size."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(tasks):
        size = float(rng.uniform(0, 1))
        configs = design(per_task, seed=seed * 100 + t)
        values = np.array([score(c, shift=0.2 * (size - 0.5)) for c in configs]) + rng.normal(
            0, 0.005, per_task
        )
        out.append(Task(name=f"t{t}", descriptors={"size": size}, configs=configs, values=values))
    return out

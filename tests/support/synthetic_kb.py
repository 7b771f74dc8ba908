"""Synthetic knowledge-base runs: one finished run with fixed accounting, and a knowledge base whose
datasets differ only in how high their results lie, each with the label probe that says so (what
the recommender's level step, ``domain/levels.py``, and the interval bench read)."""

from __future__ import annotations

from typing import Any

from scipy.stats import qmc

from metatune.knowledge.records import DatasetInfo, Hardware, KbRun, Provenance
from metatune.knowledge.space import DIMENSIONS, Budget, decode, encode

from .samples import FEATURES

PROBES = (0.3, 0.45, 0.6, 0.75, 0.9)


def kb_run(
    run_id: str, dataset: DatasetInfo, config: dict[str, Any], metric: float, base_model: str
) -> KbRun:
    """A finished classification run with the same accounting for every synthetic run."""
    return KbRun(
        run_id=run_id,
        dataset=dataset,
        base_model=base_model,
        task="classification",
        config=config,
        metric_name="accuracy",
        metric=metric,
        tokens_with_padding=10_000,
        train_seconds=5.0,
        wall_seconds=8.0,
        energy_wh=0.2,
        hardware=Hardware(device="cpu"),
        provenance=Provenance(source="seed-kb"),
    )


def levelled_kb(*, probed: bool, base_model: str = "all-MiniLM-L6-v2") -> list[KbRun]:
    """Five datasets alike in every meta-feature: each reaches its ``probe`` plus a configuration's
    effect (at most 0.1 below it, best at a mid learning rate), and (``probed``) its profile says
    its probe."""
    runs = []
    for d, probe in enumerate(PROBES):
        features = FEATURES.model_copy(
            update={"n_examples": 1500, "probe_accuracy": probe if probed else None}
        )
        dataset = DatasetInfo(name=f"level{d}", features=features)
        points = qmc.Sobol(d=len(DIMENSIONS), scramble=True, seed=d).random(16)
        for i, point in enumerate(points):
            config = decode(point, budget=Budget(max_steps=64)).model_dump(mode="json")
            config.pop("seed", None)
            lr = encode(config)[0]
            runs.append(
                kb_run(
                    f"level:{d}:{i}", dataset, config, probe - 0.1 * (2 * lr - 1) ** 2, base_model
                )
            )
    return runs

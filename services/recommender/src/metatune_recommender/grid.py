"""What the knowledge base predicts a grid search would find for a profiled study.

``python -m metatune_recommender.grid STUDY_ID... [--json]`` reads the knowledge base and each
study's profile from the configured database, and for each study predicts the objective of every
configuration of the search space's grid (:func:`metatune.knowledge.space.grid`) from the
profile alone (the learned prior, before any of the study's runs), as the recommender predicts
its own trials. It answers with the grid's best predicted configuration and its prediction
± std: the knowledge base's estimate of what sweeping the whole grid would have found. ``metatune
demo`` runs it to put its three trials beside a grid's 72.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any
from uuid import UUID

import numpy as np

from metatune.knowledge.space import grid
from metatune.knowledge.store import KnowledgeStore
from metatune.settings import get_settings

from .domain.history import feature_descriptors
from .domain.recommender import (
    Recommender,
    impute,
    nearest_base_model,
    profile_descriptors,
)
from .domain.similarity import task_weights


def grid_estimate(recommender: Recommender, base_model: str, features: dict[str, Any]) -> dict:
    """The grid's best configuration by the prior's mean, in metric units with its ± std."""
    used = nearest_base_model(base_model, recommender.base_models())
    if used is None:
        return {"error": "the knowledge base holds no LoRA run"}
    history = recommender.history(used)
    prior = recommender.prior(used)
    descriptors, _ = impute(feature_descriptors(profile_descriptors(features)), history)
    budget = recommender.reference(used)
    configs = [recommender.at_reference(c.model_dump(mode="json"), budget) for c in grid()]
    posterior = prior.condition(descriptors, [], [])
    mean, std = posterior.predict_inputs(prior.inputs(configs, descriptors))
    best = int(np.argmax(mean))
    predicted, sd = recommender._to_metric(
        float(mean[best]), float(std[best]), posterior, history, task_weights(descriptors, history)
    )
    config = grid()[best]
    return {
        "grid": len(configs),
        "base_model": used,
        "metric_name": history[0].metric_name if history else "metric",
        "best_predicted": predicted,
        "best_predicted_std": sd,
        "best_config": {
            "rank": config.rank,
            "batch_size": config.batch_size,
            "learning_rate": config.learning_rate,
        },
    }


async def estimates(study_ids: list[UUID]) -> dict[str, dict]:
    settings = get_settings()
    async with KnowledgeStore(
        settings.database_url, connect_timeout_s=settings.connect_timeout_s
    ) as store:
        runs = await store.runs()
        profiles = {s: await store.profile(s) for s in study_ids}
    recommender = Recommender(runs)
    out: dict[str, dict] = {}
    for study_id, profile in profiles.items():
        if profile is None:
            out[str(study_id)] = {"error": "no profile of this study in the knowledge base"}
            continue
        out[str(study_id)] = await asyncio.to_thread(
            grid_estimate,
            recommender,
            profile.spec.base_model,
            profile.features.model_dump(),
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m metatune_recommender.grid",
        description="The knowledge base's estimate of the best a grid search would find",
    )
    parser.add_argument("studies", nargs="+", type=UUID, help="study ids (profiled)")
    args = parser.parse_args(argv)
    json.dump(asyncio.run(estimates(args.studies)), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

"""What the knowledge base has measured on datasets like a study's: the evidence beside a prediction.

``python -m metatune_recommender.tools.evidence STUDY_ID...`` reads the knowledge base and each study's
profile from the configured database and answers, per study, its nearest datasets in the
knowledge base (by the recommender's similarity of task descriptors, :func:`task_weights`), each
with the best accuracy its runs measured at the knowledge base's reference budget (the budget most
of its runs trained with): figures runs produced, to set beside the study's best trial and the
prediction published before it trained. ``metatune demo`` runs it for its closing table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any
from uuid import UUID

import numpy as np

from metatune.knowledge.store import KnowledgeStore
from metatune.settings import get_settings

from ..adapters.prior_cache import prior_cache
from ..domain.history import feature_descriptors
from ..domain.recommender import (
    Recommender,
    Reference,
    budget_key,
    impute,
    nearest_base_model,
    profile_descriptors,
)
from ..domain.similarity import task_weights

NEAREST = 2


def describe(reference: Reference) -> str:
    """The reference budget in words: '2 epochs over 1500 rows, 128 tokens, cuda'."""
    budget = reference.budget
    length = (f"{budget.max_steps} steps" if budget.max_steps else f"{budget.epochs:g} epochs") + (
        f" over {reference.train_rows} rows" if reference.train_rows else ""
    )
    return f"{length}, {budget.max_seq_length} tokens" + (
        f", {reference.device}" if reference.device else ""
    )


def nearest_measured(
    recommender: Recommender,
    base_model: str,
    features: dict[str, Any],
    *,
    study_id: UUID | None = None,
    k: int = NEAREST,
) -> dict[str, Any]:
    """The ``k`` knowledge-base datasets nearest the profile (the study's own runs left out), each
    with the best accuracy measured at the reference budget and how many runs measured it."""
    used = nearest_base_model(base_model, recommender.base_models())
    if used is None:
        return {"error": "the knowledge base holds no LoRA run"}
    history = [
        task
        for task in recommender.history(used)
        if study_id is None or all(run.study_id != study_id for run in task.runs)
    ]
    if not history:
        return {"error": "the knowledge base holds no other dataset"}
    descriptors, _ = impute(feature_descriptors(profile_descriptors(features)), history)
    weights = task_weights(descriptors, history)
    reference = recommender.reference(used)
    nearest = []
    for index in np.argsort(-weights):
        task = history[int(index)]
        measured = [
            run for run in task.runs if run.metric is not None and budget_key(run) == reference.key
        ]
        if measured:
            nearest.append(
                {
                    "dataset": task.name,
                    "similarity": round(float(weights[index]), 3),
                    "best_measured": max(float(run.metric or 0.0) for run in measured),
                    "runs": len(measured),
                    "majority_baseline": measured[0].majority_baseline,
                }
            )
        if len(nearest) == k:
            break
    return {
        "base_model": used,
        "metric_name": history[0].metric_name,
        "budget": describe(reference),
        "nearest": nearest,
    }


async def evidence(study_ids: list[UUID]) -> dict[str, dict]:
    settings = get_settings()
    async with KnowledgeStore(
        settings.database_url, connect_timeout_s=settings.connect_timeout_s
    ) as store:
        runs = await store.runs()
        profiles = {s: await store.profile(s) for s in study_ids}
    recommender = Recommender(runs, store=prior_cache(settings))
    out: dict[str, dict] = {}
    for study_id, profile in profiles.items():
        if profile is None:
            out[str(study_id)] = {"error": "no profile of this study in the knowledge base"}
            continue
        out[str(study_id)] = await asyncio.to_thread(
            nearest_measured,
            recommender,
            profile.spec.base_model,
            profile.features.model_dump(),
            study_id=study_id,
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m metatune_recommender.tools.evidence",
        description="The best accuracy the knowledge base measured on the datasets nearest a study's",
    )
    parser.add_argument("studies", nargs="+", type=UUID, help="study ids (profiled)")
    args = parser.parse_args(argv)
    json.dump(asyncio.run(evidence(args.studies)), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

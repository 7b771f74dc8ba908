"""What the knowledge base has measured on datasets like a study's: the evidence beside a prediction.

Per study, its nearest datasets in the knowledge base (by the recommender's similarity of task
descriptors, :func:`task_weights`), each with the best metric its runs measured at the knowledge
base's reference budget (the budget most of its runs trained with): figures runs produced, to set
beside the study's best trial and the prediction published before it trained. The recommender
answers it on ``metatune.requests.knowledge.evidence`` (:mod:`..adapters.evidence`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import numpy as np

from metatune.contracts import NearestDataset, StudyEvidence

from .history import feature_descriptors
from .recommender import (
    Recommender,
    Reference,
    budget_key,
    impute,
    nearest_base_model,
    profile_descriptors,
)
from .similarity import task_weights

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
    features: Mapping[str, Any],
    *,
    study_id: UUID | None = None,
    k: int = NEAREST,
) -> StudyEvidence:
    """The ``k`` knowledge-base datasets nearest the profile (the study's own runs left out), each
    with the best metric measured at the reference budget and how many runs measured it."""
    used = nearest_base_model(base_model, recommender.base_models())
    if used is None:
        return StudyEvidence(error="the knowledge base holds no LoRA run")
    history = [
        task
        for task in recommender.history(used)
        if study_id is None or all(run.study_id != study_id for run in task.runs)
    ]
    if not history:
        return StudyEvidence(error="the knowledge base holds no other dataset")
    descriptors, _ = impute(feature_descriptors(profile_descriptors(features)), history)
    weights = task_weights(descriptors, history)
    reference = recommender.reference(used)
    nearest: list[NearestDataset] = []
    for index in np.argsort(-weights):
        task = history[int(index)]
        measured = [
            run for run in task.runs if run.metric is not None and budget_key(run) == reference.key
        ]
        if measured:
            nearest.append(
                NearestDataset(
                    dataset=task.name,
                    similarity=round(float(weights[index]), 3),
                    best_measured=max(float(run.metric or 0.0) for run in measured),
                    runs=len(measured),
                    majority_baseline=measured[0].majority_baseline,
                )
            )
        if len(nearest) == k:
            break
    return StudyEvidence(
        base_model=used,
        metric_name=history[0].metric_name,
        budget=describe(reference),
        nearest=nearest,
    )

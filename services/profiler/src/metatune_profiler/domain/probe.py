"""The probe: how well the base model's own frozen features separate a dataset's labels (a
landmarker).

Meta-features such as lengths or label entropy say what a dataset looks like, not how hard its
labels are to tell apart for the model that will be tuned; two datasets alike in both can sit 0.4
apart in accuracy. A landmarker (Pfahringer, Bensusan & Giraud-Carrier 2000) measures that
directly with a fast learner: here a logistic regression on the base model's mean-pooled frozen
embeddings (what the model already knows of the texts, before any tuning), scored by 5-fold
cross-validated accuracy on a fixed number of rows drawn from the profile's seeded sample (a
probe fitted on more rows scores higher, so every dataset is probed at one size). The recommender
reads a new dataset's accuracy level from it before any result (what the similar datasets
reached, moved by how much easier or harder their probes say this one is).

The texts are embedded through an :class:`Encoder` port (the model is loaded and run by
``adapters.encoder``); the classifier is fitted on four folds and scored on the fifth. A fold
whose training rows hold one class predicts that class. Text is cut to ``PROBE_CHARS``
characters before it is embedded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

from .rows import Row

PROBE_FOLDS = 5
PROBE_CHARS = 600  # characters of each text (and pair) the probe reads


class Encoder(Protocol):
    """The base model's frozen features of texts (and their pairs): one row of floats a text."""

    def __call__(self, texts: Sequence[str], pairs: Sequence[str] | None) -> np.ndarray: ...


def probe_accuracy(
    rows: Sequence[Row], n_rows: int, encoder: Encoder, seed: int = 0
) -> float | None:
    """The 5-fold cross-validated accuracy of a logistic regression on ``encoder``'s features of
    ``n_rows`` of ``rows`` (labelled ones, drawn at random with ``seed``), or None where fewer are
    labelled, or they hold a single label or more labels than half the rows (the encoder is then
    not called). Always ``n_rows`` rows: a classifier fitted on more rows scores higher, so
    probes of different datasets compare only at one size."""
    labelled = [row for row in rows if row.label is not None]
    if len(labelled) < n_rows or n_rows < PROBE_FOLDS * 2:
        return None
    if len(labelled) > n_rows:
        drawn = np.random.default_rng(seed).choice(len(labelled), n_rows, replace=False)
        labelled = [labelled[i] for i in sorted(drawn.tolist())]
    labels = np.array([row.label for row in labelled])
    if not 2 <= len(set(labels.tolist())) <= n_rows // 2:
        return None  # one label, or labels nearly unique: nothing to probe
    texts = [row.text[:PROBE_CHARS] for row in labelled]
    paired = labelled[0].text_pair is not None
    pairs = [(row.text_pair or "")[:PROBE_CHARS] for row in labelled] if paired else None
    features = np.asarray(encoder(texts, pairs), dtype=np.float64)
    right = 0
    for train, test in KFold(PROBE_FOLDS, shuffle=True, random_state=seed).split(texts):
        classes = np.unique(labels[train])
        if len(classes) < 2:
            right += int(np.sum(labels[test] == classes[0]))
            continue
        model = LogisticRegression(C=1.0, max_iter=2000)
        model.fit(features[train], labels[train])
        right += int(np.sum(model.predict(features[test]) == labels[test]))
    return right / len(labelled)


__all__ = ["PROBE_CHARS", "PROBE_FOLDS", "Encoder", "probe_accuracy"]

"""The probe: how well a cheap text classifier separates a dataset's labels (a landmarker).

Meta-features such as lengths or label entropy say what a dataset looks like, not how hard its
labels are to tell apart; two datasets alike in both can sit 0.4 apart in accuracy. A landmarker
(Pfahringer, Bensusan & Giraud-Carrier 2000) measures that directly with a fast learner: here a
linear support-vector classifier on word and character n-gram TF-IDF features, scored by 5-fold
cross-validated accuracy on a fixed number of rows drawn from the profile's seeded sample (a
probe fitted on more rows scores higher, so every dataset is probed at one size). The recommender
reads a new dataset's accuracy level from it before any result (what the similar datasets
reached, moved by how much easier or harder their probes say this one is).

The TF-IDF vocabulary is fitted once on every sampled row (unsupervised); the classifier is fitted
on four folds and scored on the fifth. A fold whose training rows hold one class predicts that
class. Text is cut to ``PROBE_CHARS`` characters, so a dataset of long documents costs about as
much as one of short sentences (a few tenths of a second of CPU for 300 rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.model_selection import KFold
from sklearn.svm import LinearSVC

from .rows import Row

PROBE_FOLDS = 5
PROBE_CHARS = 600  # characters of each text (and pair) the probe reads
PAIR_MARK = " \u241e "  # between a text and its pair, so n-grams do not run across them


def probe_accuracy(rows: Sequence[Row], n_rows: int, seed: int = 0) -> float | None:
    """The 5-fold cross-validated accuracy of the TF-IDF probe on ``n_rows`` of ``rows`` (labelled
    ones, drawn at random with ``seed``), or None where fewer are labelled, or they hold a single
    label or more labels than half the rows. Always ``n_rows`` rows: a classifier fitted on more
    rows scores higher, so probes of different datasets compare only at one size."""
    labelled = [row for row in rows if row.label is not None]
    if len(labelled) < n_rows or n_rows < PROBE_FOLDS * 2:
        return None
    if len(labelled) > n_rows:
        drawn = np.random.default_rng(seed).choice(len(labelled), n_rows, replace=False)
        labelled = [labelled[i] for i in sorted(drawn.tolist())]
    labels = np.array([row.label for row in labelled])
    if not 2 <= len(set(labels.tolist())) <= n_rows // 2:
        return None  # one label, or labels nearly unique: nothing to probe
    texts = [_probe_text(row) for row in labelled]
    words = TfidfVectorizer(sublinear_tf=True, max_features=20000)
    chars = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, max_features=30000
    )
    features = hstack([words.fit_transform(texts), chars.fit_transform(texts)]).tocsr()
    right = 0
    for train, test in KFold(PROBE_FOLDS, shuffle=True, random_state=seed).split(texts):
        classes = np.unique(labels[train])
        if len(classes) < 2:
            right += int(np.sum(labels[test] == classes[0]))
            continue
        model = LinearSVC(C=0.5)
        model.fit(features[train], labels[train])
        right += int(np.sum(model.predict(features[test]) == labels[test]))
    return right / len(labelled)


def _probe_text(row: Row) -> str:
    text = row.text[:PROBE_CHARS]
    return text if row.text_pair is None else text + PAIR_MARK + row.text_pair[:PROBE_CHARS]


__all__ = ["PROBE_CHARS", "PROBE_FOLDS", "probe_accuracy"]

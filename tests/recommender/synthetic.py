"""Synthetic knowledge bases with a known optimum, for the recommender's tests."""

from __future__ import annotations

import numpy as np
from scipy.stats import qmc

from metatune.contracts import MetaFeatures
from metatune.knowledge.records import DatasetInfo, KbRun
from metatune.knowledge.space import DIMENSIONS, Budget, decode, encode
from metatune_recommender.domain.history import Task
from tests.support.samples import FEATURES
from tests.support.synthetic_kb import kb_run

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
            dataset = DatasetInfo(name=f"syn{d}", features=features(1000 + 500 * d))
            runs.append(kb_run(f"syn:{d}:{i}", dataset, config, score(config), base_model))
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


def profile(kind: str, jitter: float = 0.0, n_examples: int = 2000) -> MetaFeatures:
    """A dataset profile of one of two clearly different kinds: ``intents`` (many classes, short
    English utterances) or ``sentiment`` (three classes, longer texts in a tokenizer-unfriendly
    script); ``jitter`` moves it a little within its kind."""
    if kind == "intents":
        update = {
            "n_classes": 70,
            "label_entropy_bits": 6.0,
            "tokens_mean": 12.0,
            "tokens_p50": 11.0,
            "tokens_p95": 20.0,
            "words_mean": 9.0,
            "unk_rate": 0.0,
            "fertility": 1.3,
            "mattr": 0.5,
        }
    else:
        update = {
            "n_classes": 3,
            "label_entropy_bits": 1.5,
            "tokens_mean": 60.0,
            "tokens_p50": 50.0,
            "tokens_p95": 140.0,
            "words_mean": 30.0,
            "unk_rate": 0.7,
            "fertility": 3.0,
            "mattr": 0.85,
        }
    update = {k: v if k == "n_classes" else v * (1 + jitter) for k, v in update.items()}
    # what grows or shrinks with the rows profiled (Heaps' law for the vocabulary)
    words = n_examples * update["words_mean"]
    vocab = int(3.0 * words**0.7 if kind == "sentiment" else 1.5 * words**0.6)
    sized = {
        "n_examples": n_examples,
        "sample_size": n_examples,
        "vocab_size": vocab,
        "ttr": vocab / words,
        "hapax_ratio": 0.45 + 0.05 * np.log10(n_examples),
        "words_max": int(update["words_mean"] * (2 + np.log10(n_examples))),
        "tokens_max": int(update["tokens_mean"] * (2 + np.log10(n_examples))),
    }
    return FEATURES.model_copy(update={**update, **sized})


def two_kinds_kb(per_kind: int = 4, base_model: str = "all-MiniLM-L6-v2") -> list[KbRun]:
    """A knowledge base as the seed's: every dataset trained on the same 16 configurations with
    the same number of rows (one dataset a few rows short); intents datasets do best at high
    learning rates, sentiment datasets at low ones (the optimum's learning-rate coordinate
    shifted by +-0.3)."""
    configs = design(16, seed=0)
    runs = []
    for kind, shift in (("intents", 0.3), ("sentiment", -0.3)):
        for d in range(per_kind):
            n = 1536 if (kind, d) == ("sentiment", 0) else 2000
            for i, config in enumerate(configs):
                dataset = DatasetInfo(
                    name=f"{kind}{d}", features=profile(kind, 0.05 * d, n_examples=n)
                )
                metric = score(config, shift=shift)
                runs.append(kb_run(f"two:{kind}{d}:{i}", dataset, config, metric, base_model))
    return runs

"""The settings of the learned prior (:mod:`.prior`), in a module of their own: the recommender's
pre-result path (:mod:`.scoring`) reads them without importing torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OPENINGS = ("portfolio", "cover")


@dataclass(frozen=True)
class PriorSettings:
    iterations: int = 300
    learning_rate: float = 0.02
    points_per_task: int = 128  # subsample per task and step: bounded cost, equal weight per task
    hidden: int = 32
    weight_decay: float = 1e-3
    members: int = (
        1  # MLP means averaged (each trained from its own initialisation, one shared kernel)
    )
    descriptors: bool = (
        True  # task descriptors as mean inputs (False: one mean for every task, as HyperBO)
    )
    learned_mean: bool = True  # False: a constant mean (the "flat prior" of the tests)
    # True: once the task has transfer_after results, its mean is the posteriors of the history
    # tasks that measured its search space (HistorySource, gated by source_overlap), weighted by how
    # they order its results; with transfer_after 0 the top-k is their set cover too
    transfer: bool = True
    transfer_ei: bool = (
        True  # False: the sources choose the top-k only, EI runs on the learned mean
    )
    # a history task is a source only when it measured at least this share of the candidate
    # configurations exactly (the same search space): a posterior read far from its own rows is
    # the learned mean again, only flatter; 0: every history task
    source_overlap: float = 0.5
    # the sources stand in for the learned mean from this many results on; 0: the top-k too, as
    # their set cover (measured: on the GPU seed 5.7x / 83 % against 3.6x / 69 % with 1; on the
    # public tables 10.9x / 39 % against 10.1x / 50 %)
    transfer_after: int = 0
    own_weight: float = 0.25  # the learned mean's share of the prior weight among the sources
    rank_temperature: float = 1.0  # per mis-ordered pair of the task's results: weight x exp(-this)
    top_quantile: float = 0.03  # the top-k covers each related task's top 3 % (set cover)
    # the top-k before any result, where sources exist: "portfolio", the history portfolio's first
    # k + opening_spare configurations ordered by this task's prior mean (select_opening), or
    # "cover", the sources' set cover (select_cover); measured side by side in the README
    opening: Literal["portfolio", "cover"] = "portfolio"
    opening_spare: int = 1
    # the opening's picks lie at least this quantile of the pool's pairwise configuration
    # distances apart (portfolio.distinct_picks): different bets, not neighbours; 0: no spread
    opening_spread: float = 0.03
    seed: int = 0

    def __post_init__(self) -> None:
        if self.opening not in OPENINGS:
            raise ValueError(f"opening must be one of {OPENINGS}, not {self.opening!r}")
        if self.opening_spare < 0:
            raise ValueError(f"opening_spare must be >= 0, not {self.opening_spare}")

"""Typed failures of the recommender's domain code."""

from __future__ import annotations

from metatune.errors import MetaTuneError


class RecommenderError(MetaTuneError):
    """Base of the recommender's own errors."""


class EmptyHistory(RecommenderError):
    """No task in the knowledge base has enough runs to learn a prior from."""


class SurrogateFailure(RecommenderError):
    """The Gaussian process could not be fitted or conditioned (a non-finite loss, a failed Cholesky)."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(f"Gaussian process {stage} failed: {detail}")
        self.stage = stage
        self.detail = detail

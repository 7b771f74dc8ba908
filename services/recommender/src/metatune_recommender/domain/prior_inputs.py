"""The learned prior's inputs: a configuration's encoded columns, then its task's descriptors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .encoding import Encoder
from .history import Task
from .prior_settings import PriorSettings
from .shared_gp import DTYPE


@dataclass(frozen=True)
class PriorInputs:
    """The encoders of configurations and of task descriptors, fitted on the history."""

    config_encoder: Encoder
    descriptor_encoder: Encoder

    @classmethod
    def fit(
        cls,
        tasks: Sequence[Task],
        settings: PriorSettings,
        extra_configs: Sequence[Mapping[str, Any]] = (),
    ) -> PriorInputs:
        """Encoders of ``tasks``' configurations and ``extra_configs`` (the candidates to be scored
        later, so their columns exist) and of their descriptors (none unless
        ``settings.descriptors``; a category needs two tasks)."""
        config_rows = [c for t in tasks for c in t.configs] + list(extra_configs)
        descriptors = (
            Encoder.fit([t.descriptors for t in tasks], min_category_count=2)
            if settings.descriptors
            else Encoder()
        )
        return cls(Encoder.fit(config_rows), descriptors)

    @property
    def config_dim(self) -> int:
        """The configuration's columns among the inputs (one, constant, if it has none)."""
        return max(1, self.config_encoder.dim)

    @property
    def dim(self) -> int:
        return self.config_dim + self.descriptor_encoder.dim

    def inputs(
        self, configs: Sequence[Mapping[str, Any]], descriptors: Mapping[str, Any]
    ) -> torch.Tensor:
        """The inputs of ``configs`` run on a task with ``descriptors``, shape (n, :attr:`dim`)."""
        cfg = self.config_encoder.transform(configs)
        if cfg.shape[1] == 0:
            cfg = np.zeros((len(configs), 1))
        desc = self.descriptor_encoder.transform([descriptors])
        full = np.hstack([cfg, np.repeat(desc, len(configs), axis=0)])
        return torch.as_tensor(full, dtype=DTYPE)

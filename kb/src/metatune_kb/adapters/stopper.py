"""The learning-curve stopper fitted from a knowledge-base file (``metatune kb fit-stopper``).

The trainer-agent's shipped model, ``metatune_trainer_agent/data/curve_stopper.json``, is written
by that command from the seed knowledge base; its provenance (file, digest, runs, datasets)
travels inside it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from metatune.knowledge.records import KB_SCHEMA_VERSION, KbRun

if TYPE_CHECKING:  # the predictor imports torch (through the trainer): only when a command runs
    from metatune_trainer_agent.domain.curve_stop import CurveStopper, TrainingCurve


def read_runs(path: Path) -> list[KbRun]:
    """The runs of a knowledge-base file, read only (a line still being written is left out)."""
    from metatune_trainer_agent.domain.curve_stop import CurveModelError

    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except OSError as exc:
        raise CurveModelError(f"knowledge base {path} cannot be read: {exc}") from exc
    lines = raw.split(b"\n")
    if not raw.endswith(b"\n"):
        lines = lines[:-1]  # a build is appending to it
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise CurveModelError(f"knowledge base {path} is empty")
    header = json.loads(lines[0])
    if header.get("kind") != "metatune-knowledge-base":
        raise CurveModelError(f"{path} is not a MetaTune knowledge-base file")
    if header.get("schema_version") != KB_SCHEMA_VERSION:
        raise CurveModelError(
            f"{path} has knowledge-base schema version {header.get('schema_version')}; this code reads {KB_SCHEMA_VERSION}"
        )
    return [KbRun.model_validate_json(line) for line in lines[1:]]


def training_curves(runs: list[KbRun], metric: str = "accuracy") -> list[TrainingCurve]:
    from metatune_trainer_agent.domain.curve_stop import TrainingCurve

    return [c for c in (TrainingCurve.of_kb_run(r, metric) for r in runs) if c is not None]


def fit_from_kb(path: Path, metric: str = "accuracy") -> CurveStopper:
    from metatune_trainer_agent.domain.curve_stop import DEFAULT_GRID, CurveStopper

    runs = read_runs(path)
    curves = training_curves(runs, metric)
    provenance = {
        "kb_file": path.name,
        "kb_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "kb_runs_read": len(runs),
        "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": "per prefix length: GradientBoostingRegressor(150 trees, depth 2) on final - last metric; "
        "normalised split-conformal upper bound (a second model of the residual size) from residuals out "
        "of fold, grouped by dataset",
    }
    return CurveStopper.fit(curves, grid=DEFAULT_GRID, metric_name=metric, provenance=provenance)

"""The learning-curve stopper's model file (compact JSON of :meth:`~..domain.curve_stop.CurveStopper.to_json`)."""

from __future__ import annotations

import json
from pathlib import Path

from ..domain.curve_stop import CurveModelError, CurveStopper


def save_stopper(stopper: CurveStopper, path: Path) -> None:
    path.write_text(json.dumps(stopper.to_json(), separators=(",", ":")) + "\n", encoding="utf-8")


def load_stopper(path: Path) -> CurveStopper:
    """The stopper saved at ``path``; a :class:`CurveModelError` if it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CurveModelError(f"curve-stop model {path} cannot be read: {exc}") from exc
    return CurveStopper.from_json(data)

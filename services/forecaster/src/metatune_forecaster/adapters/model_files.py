"""The forecaster's model files, read and written here so the domain never touches a disk: the
trees (``model.joblib``, xz-compressed pickle, checked on load by :func:`domain.model.checked`)
and the weather-error calibration (``weather_error.json``)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import joblib

from ..domain.model import CarbonModel, ModelArtifactError, checked
from ..domain.weather_error import WeatherErrorModel

UNREADABLE = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    ImportError,
    AttributeError,
    pickle.UnpicklingError,
)


def save_model(model: CarbonModel, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, path, compress=("xz", 6))


def load_model(path: Path) -> CarbonModel:
    """The model at ``path``; a :class:`ModelArtifactError` if it is missing, unreadable or of
    another layout."""
    try:
        model = joblib.load(path)
    except UNREADABLE as exc:
        raise ModelArtifactError(f"cannot load the forecaster model {path}: {exc}") from exc
    return checked(model, str(path))


def save_weather_error(model: WeatherErrorModel, path: Path) -> None:
    path.write_text(model.model_dump_json(indent=2) + "\n")


def load_weather_error(path: Path) -> WeatherErrorModel:
    return WeatherErrorModel.model_validate(json.loads(path.read_text()))

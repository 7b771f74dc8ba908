"""Paths of the files the forecaster ships with (model, weather-error calibration, replay extract),
and the command line of the tools that build them."""

from __future__ import annotations

import argparse
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
MODEL_PATH = DATA_DIR / "model.joblib"
WEATHER_ERROR_PATH = DATA_DIR / "weather_error.json"
REPLAY_PATH = DATA_DIR / "replay.parquet"


def data_folder_parser(doc: str, folder_help: str) -> argparse.ArgumentParser:
    """A tool's argument parser (described by its docstring's first line) with ``--data FOLDER``,
    the carbon data folder it reads."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help=folder_help)
    return parser

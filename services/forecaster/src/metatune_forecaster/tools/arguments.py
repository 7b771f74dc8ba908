"""The command line the forecaster's tools share."""

from __future__ import annotations

import argparse
from pathlib import Path


def data_folder_parser(doc: str, folder_help: str) -> argparse.ArgumentParser:
    """A tool's argument parser (described by its docstring's first line) with ``--data FOLDER``,
    the carbon data folder it reads."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help=folder_help)
    return parser

"""An adapter's label map, as every copy of an adapter carries it (``metatune adapter download``,
the MLflow export): ``labels.json`` beside the PEFT files, holding ``id2label`` and ``label2id``
as transformers names them, built from the label names by id that the trainer-agent saves in the
adapter's ``metatune.json``.

Not in ``adapter_config.json`` (PEFT's ``LoraConfig`` drops keys it does not know) nor in a
``config.json`` (transformers would take the folder for a whole model).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LABELS_FILE = "labels.json"
METADATA_FILE = "metatune.json"  # the trainer-agent's: labels by id, task, config


def label_maps(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``id2label`` and ``label2id`` as transformers' configs hold them (JSON keys are strings):
    label id ``i`` is ``labels[i]``, as the trainer-agent numbers them."""
    return {
        "id2label": {str(i): name for i, name in enumerate(labels)},
        "label2id": {name: i for i, name in enumerate(labels)},
    }


def write_labels(folder: Path, labels: Sequence[str]) -> Path | None:
    """``labels.json`` in ``folder`` (None: no labels, as for a causal LM)."""
    if not labels:
        return None
    path = folder / LABELS_FILE
    path.write_text(json.dumps(label_maps(labels), indent=2) + "\n")
    return path


def saved_labels(folder: Path) -> list[str]:
    """The label names by id an extracted adapter's ``metatune.json`` holds (none: empty)."""
    metadata = folder / METADATA_FILE
    if not metadata.is_file():
        return []
    labels = json.loads(metadata.read_text()).get("labels") or []
    return [str(name) for name in labels]

"""The trained adapter as one object: a tar of the peft adapter directory plus ``metatune.json``.

``tar -xf`` it and ``PeftModel.from_pretrained(base, dir)`` loads it; ``metatune.json`` says what
the label ids mean, which base model and configuration produced it and with what metrics.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from torch import nn

METADATA = "metatune.json"


def pack_adapter(model: nn.Module, metadata: dict[str, Any]) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model.save_pretrained(root)  # type: ignore[operator]  # a PEFT model; nn.Module lacks it
        (root / METADATA).write_text(json.dumps(metadata, indent=2, sort_keys=True, default=str))
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    tar.add(path, arcname=str(path.relative_to(root)))
        return buffer.getvalue()


def unpack_adapter(data: bytes, directory: Path) -> dict[str, Any]:
    """Extract an adapter archive into ``directory``; returns its metadata."""
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(directory, filter="data")
    metadata: dict[str, Any] = json.loads((directory / METADATA).read_text())
    return metadata

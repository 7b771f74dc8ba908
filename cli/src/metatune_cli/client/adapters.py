"""An adapter archive made into a folder ready for the Hugging Face Hub.

The trainer-agent uploads each adapter as a tar of the PEFT directory plus ``metatune.json`` to the
object store bucket ``adapters``, under the key its ``RunCompleted.adapter_key`` names. The
extracted folder gets what the Hub reads, from the event log: a model card ``README.md``
(:mod:`metatune_cli.model_card`: metadata, metrics against the majority baseline, energy and
emissions), the label map ``labels.json`` (``id2label``/``label2id``) and, where PEFT recorded
the base model as the training machine's local path, its Hub id in ``adapter_config.json``. It
still loads with ``peft.PeftModel.from_pretrained(base, DIR)``.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from metatune.contracts import RunCompleted, StudySpec
from metatune.labels import METADATA_FILE, write_labels
from metatune.models import hub_model_id

from ..model_card import model_card

CARD = "README.md"
PEFT_CONFIG = "adapter_config.json"
METADATA = METADATA_FILE


def as_downloaded(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's ``data`` filter (no absolute paths, links out or devices), and each file with the
    permissions of any file the user writes (their umask's, 0644 as a rule) rather than the agent's
    (its weights file is 0600): the folder reads as one downloaded model."""
    member = tarfile.data_filter(member, dest)
    if not member.isfile():
        return member
    # None: no chmod after the write (tarfile's filter API; typeshed annotates an int)
    return member.replace(mode=None, deep=False)  # type: ignore[arg-type]


def unpack(archive: Path, out: Path) -> dict[str, Any]:
    """Extract the adapter's tar into ``out``; the trainer-agent's metadata it holds."""
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter=as_downloaded)
    metadata_file = out / METADATA
    return json.loads(metadata_file.read_text()) if metadata_file.is_file() else {}


def make_hub_ready(
    out: Path,
    run: RunCompleted,
    spec: StudySpec | None,
    labels: list[str],
    regions: dict[str, str],
) -> None:
    """Write the model card and the label map into the extracted adapter ``out`` (the README.md
    template PEFT saved, naming the training machine's path as base model, is replaced)."""
    write_labels(out, labels)
    (out / CARD).write_text(model_card(run, spec=spec, labels=labels, regions=regions))
    base = run.base_model or (spec.base_model if spec else None)
    name_base_on_hub(out / PEFT_CONFIG, hub_model_id(base) if base else None)


def name_base_on_hub(config_file: Path, hub_id: str | None) -> None:
    """PEFT records the base model as it was loaded: on the trainer-agent, a local folder (the
    embedded MiniLM's, inside its venv), which means nothing elsewhere. Name its Hub id instead, as
    PEFT writes it for a model loaded from the Hub; every other key stays as PEFT wrote it."""
    if hub_id is None or not config_file.is_file():
        return
    config = json.loads(config_file.read_text())
    recorded = config.get("base_model_name_or_path")
    if isinstance(recorded, str) and hub_model_id(recorded) is None:
        config["base_model_name_or_path"] = hub_id
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True))  # as PEFT writes it

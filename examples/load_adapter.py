"""Load an adapter `metatune adapter download` wrote onto its base model with PEFT, and classify text.

    .venv/bin/metatune adapter download JOB_ID --out adapter
    .venv/bin/python examples/load_adapter.py adapter "will it rain in Oslo tomorrow"

What its model card (adapter/README.md) shows, for a machine without the Hugging Face Hub: the base
model named in adapter_config.json is loaded from MetaTune's embedded copy where it is that one
(all-MiniLM-L6-v2), else from the Hub or a local folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as transformers_logging

from metatune.models import UnknownBaseModel, resolve_base_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter", type=Path, help="the folder `metatune adapter download` wrote")
    parser.add_argument("texts", nargs="+", help="texts to classify")
    args = parser.parse_args()
    config = json.loads((args.adapter / "adapter_config.json").read_text())
    try:  # the embedded copy of the card's base model where it is that one
        base_model = resolve_base_model(config["base_model_name_or_path"])
    except UnknownBaseModel as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # transformers reports the base model's classifier as newly made: the adapter brings its own
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    labels = json.loads((args.adapter / "labels.json").read_text())
    id2label = {int(i): name for i, name in labels["id2label"].items()}
    base = AutoModelForSequenceClassification.from_pretrained(
        base_model, id2label=id2label, label2id=labels["label2id"]
    )
    with warnings.catch_warnings():
        # peft reads transformers' deprecated `is_gradient_checkpointing` as it wraps the model
        warnings.filterwarnings(
            "ignore", r"`is_gradient_checkpointing` is deprecated", FutureWarning
        )
        model = PeftModel.from_pretrained(base, args.adapter).eval()
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    for text in args.texts:
        inputs = tokenizer(text, return_tensors="pt", truncation=True)
        print(f"{model.config.id2label[model(**inputs).logits.argmax(-1).item()]}\t{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

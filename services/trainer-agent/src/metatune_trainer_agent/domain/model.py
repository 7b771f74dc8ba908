"""The LoRA model's pure parts: which modules a base checkpoint lacked (trained and saved with the
adapter) and how many parameters train. The base model and its tokenizer are loaded by
:mod:`metatune_trainer_agent.adapters.base_model`, the device opened by
:mod:`metatune_trainer_agent.adapters.devices`.
"""

from __future__ import annotations

from typing import Any

from torch import nn


def new_modules(model: nn.Module, missing_keys: Any) -> list[str]:
    """Modules whose weights the checkpoint lacked and that share no tensor with another module."""
    owners = {key.rsplit(".", 1)[0] for key in missing_keys if "." in key}
    seen: dict[int, int] = {}
    for _, param in model.named_parameters(remove_duplicate=False):
        seen[id(param)] = seen.get(id(param), 0) + 1
    fresh = []
    for name in sorted(owners):
        try:
            module = model.get_submodule(name)
        except AttributeError:
            continue
        params = list(module.parameters())
        if params and all(seen.get(id(p), 0) == 1 for p in params):
            fresh.append(name)
    # keep the outermost only: saving a module saves its children
    return [n for n in fresh if not any(n != o and n.startswith(o + ".") for o in fresh)]


def count_parameters(model: nn.Module) -> tuple[int, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total

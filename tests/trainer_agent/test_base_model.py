"""The LoRA model the agent trains: peft's deprecation noise stays out of the agent's log, and the
adapter's config names each module it saves once (peft adds the classification head itself)."""

from __future__ import annotations

import warnings

from peft import LoraConfig as PeftLoraConfig
from peft import PeftModel

from metatune.contracts import LoraConfig, TaskType
from metatune_trainer_agent.adapters.base_model import load_model, load_tokenizer


def test_wrapping_minilm_in_lora_warns_of_nothing_and_saves_each_module_once() -> None:
    tokenizer, source = load_tokenizer("all-MiniLM-L6-v2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_model(
            source,
            TaskType.classification,
            LoraConfig(),
            num_labels=3,
            pad_token_id=tokenizer.pad_token_id,
        )

    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == []
    assert isinstance(model, PeftModel)
    config = model.peft_config["default"]
    assert isinstance(config, PeftLoraConfig)
    saved = config.modules_to_save or []
    assert "classifier" in saved
    assert len(saved) == len(set(saved)), saved

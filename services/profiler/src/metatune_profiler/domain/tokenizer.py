"""The features that need the base model's (fast) tokenizer, computed on a sample (the tokenizer
is loaded by :mod:`metatune_profiler.adapters.tokenizer`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from .lexicon import words
from .rows import Row

TOKENIZE_BATCH = 512
# a lone surrogate (JSON allows "\ud800") is no Unicode scalar: the Rust tokenizer refuses the
# whole batch, so it is tokenised as U+FFFD, the replacement character a UTF-8 decoder would give
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
UNSET_MAX_LENGTH = 1_000_000  # transformers uses a huge sentinel when a model states no limit


def model_max_length(tokenizer: PreTrainedTokenizerBase) -> int | None:
    limit = int(getattr(tokenizer, "model_max_length", 0) or 0)
    return limit if 0 < limit < UNSET_MAX_LENGTH else None


@dataclass(frozen=True)
class TokenCounts:
    lengths: list[int]  # tokens per example, special tokens included (what the model is fed)
    content_tokens: int  # tokens without special tokens
    unknown_tokens: int
    words: int

    @property
    def unk_rate(self) -> float:
        return self.unknown_tokens / self.content_tokens if self.content_tokens else 0.0

    @property
    def fertility(self) -> float:
        return self.content_tokens / self.words if self.words else 0.0


def count_tokens(tokenizer: PreTrainedTokenizerBase, rows: Sequence[Row]) -> TokenCounts:
    """Tokenise ``rows`` (pairs jointly, as for fine-tuning) without truncation."""
    lengths: list[int] = []
    unknown = words_total = 0
    unk_id = tokenizer.unk_token_id
    for start in range(0, len(rows), TOKENIZE_BATCH):
        batch = rows[start : start + TOKENIZE_BATCH]
        texts = [_tokenizable(r.text) for r in batch]
        pairs = (
            [_tokenizable(r.text_pair or "") for r in batch]
            if any(r.text_pair is not None for r in batch)
            else None
        )
        encoded = tokenizer(
            texts,
            pairs,
            add_special_tokens=True,
            truncation=False,
            verbose=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        for ids, row in zip(encoded["input_ids"], batch, strict=True):
            lengths.append(len(ids))
            if unk_id is not None:
                unknown += ids.count(unk_id)
            words_total += len(words(row.text)) + (
                len(words(row.text_pair)) if row.text_pair else 0
            )
    content = sum(lengths) - _special_count(tokenizer, rows)
    return TokenCounts(lengths, content, unknown, words_total)


def _tokenizable(text: str) -> str:
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def _special_count(tokenizer: PreTrainedTokenizerBase, rows: Sequence[Row]) -> int:
    singles = sum(1 for r in rows if r.text_pair is None)
    return singles * tokenizer.num_special_tokens_to_add(pair=False) + (
        len(rows) - singles
    ) * tokenizer.num_special_tokens_to_add(pair=True)

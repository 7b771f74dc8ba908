"""The optimisation mechanics of one run: micro-batches, accumulation, mixed precision, evaluation.

Kept apart from :mod:`.run` (orchestration, accounting, hooks) so the numerics can be read in one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from metatune.contracts import LoraConfig, LrSchedule

from .batching import Batch, BatchPlan, Collator
from .checkpoint import Position
from .device import Accelerator
from .distributed import SINGLE, Group
from .encoding import EncodedSplit
from .metrics import classification_metrics

MAX_GRAD_NORM = 1.0


def lr_lambda(schedule: LrSchedule, warmup_steps: int, total_steps: int) -> Callable[[int], float]:
    """Multiplier of the peak learning rate at a step: linear warm-up, then linear / cosine decay or flat."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        if schedule == LrSchedule.constant:
            return 1.0
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        if schedule == LrSchedule.cosine:
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return max(0.0, 1.0 - progress)

    return factor


def autocast_dtype(precision: str, device: torch.device, native_bf16: bool) -> torch.dtype | None:
    """The autocast dtype for a precision choice ('auto' resolved here from the device and
    whether it computes bf16 natively); None means fp32."""
    if precision == "auto":
        if device.type != "cuda":
            # bf16 autocast pays on CPUs with native bf16 (AVX512-BF16 or AMX); without them it is
            # emulated and slower. Measured with bench/trainer_bench.py --precision (see README).
            return torch.bfloat16 if native_bf16 else None
        return torch.bfloat16 if native_bf16 else torch.float16
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@dataclass
class StepResult:
    loss: float
    tokens: int
    tokens_with_padding: int
    examples: int


@dataclass
class Evaluation:
    loss: float
    accuracy: float | None = None
    macro_f1: float | None = None
    perplexity: float | None = None

    @classmethod
    def from_record(cls, values: Mapping[str, float | None]) -> Evaluation:
        """From its record in a checkpoint (``dataclasses.asdict`` of one: ``loss`` is set)."""
        loss = values["loss"]
        if loss is None:
            raise ValueError("a checkpoint's evaluation has no loss")
        return cls(
            loss=loss,
            accuracy=values.get("accuracy"),
            macro_f1=values.get("macro_f1"),
            perplexity=values.get("perplexity"),
        )


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        *,
        config: LoraConfig,
        train: EncodedSplit,
        val: EncodedSplit,
        collator: Collator,
        accelerator: Accelerator,
        precision: str,
        micro_batch: int,
        grad_accum: int,
        group_by_length: bool,
        total_steps: int,
        causal_lm: bool,
        num_labels: int,
        group: Group = SINGLE,
    ) -> None:
        self.model = model
        self.group = group
        # the module the optimizer steps through: ``model`` itself, or (across processes) the
        # DDP wrapper made at the first step, once the smoke test and a resume have run
        self.train_module: nn.Module = model
        self.config = config
        self.train_split = train
        self.val_split = val
        self.collator = collator
        self.device = accelerator.device
        self.dtype = autocast_dtype(precision, self.device, accelerator.native_bf16)
        self.micro_batch = micro_batch
        self.grad_accum = grad_accum
        self.total_steps = total_steps
        self.causal_lm = causal_lm
        self.num_labels = num_labels
        self.plan = BatchPlan(
            train.lengths, micro_batch, seed=config.seed, group_by_length=group_by_length
        )
        params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": config.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=config.learning_rate,
        )
        warmup = round(config.warmup_ratio * total_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(config.lr_schedule, warmup, total_steps)
        )
        self.scaler = torch.amp.GradScaler("cuda") if self.dtype == torch.float16 else None
        self.position = Position()
        self._epoch_batches: list[list[int]] | None = None

    def resize(self, micro_batch: int, grad_accum: int) -> None:
        """Change the micro-batch (OOM probing) keeping the effective batch; only before step 1."""
        self.micro_batch = micro_batch
        self.grad_accum = grad_accum
        self.plan = BatchPlan(
            self.train_split.lengths,
            micro_batch,
            seed=self.config.seed,
            group_by_length=self.plan.group_by_length,
        )
        self._epoch_batches = None

    # ----------------------------------------------------------------- data position
    def _next_indices(self) -> list[int]:
        if self._epoch_batches is None:
            self._epoch_batches = self.plan.epoch(self.position.epoch)
        if self.position.batch >= len(self._epoch_batches):
            self.position.epoch += 1
            self.position.batch = 0
            self._epoch_batches = self.plan.epoch(self.position.epoch)
        indices = self._epoch_batches[self.position.batch]
        self.position.batch += 1
        return indices

    def set_position(self, position: Position) -> None:
        self.position = Position(**vars(position))
        self._epoch_batches = None

    # ----------------------------------------------------------------- numerics
    def _autocast(self) -> AbstractContextManager[object]:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def forward_backward(
        self, batch: Batch, scale: float, module: nn.Module | None = None
    ) -> float:
        with self._autocast():
            loss = (module or self.model)(**batch.inputs).loss
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()}")
        scaled = loss * scale
        (self.scaler.scale(scaled) if self.scaler else scaled).backward()
        return float(loss.detach())

    def _distributed_module(self) -> nn.Module:
        if self.group.distributed and self.train_module is self.model:
            self.train_module = self.group.parallel(self.model)
        return self.train_module

    def train_step(self) -> StepResult:
        """One optimizer step over ``grad_accum`` micro-batches (across processes: this rank's
        slice of each, the gradients averaged by DDP; the result covers every rank)."""
        module = self._distributed_module()
        self.model.train()
        total = StepResult(loss=0.0, tokens=0, tokens_with_padding=0, examples=0)
        for micro in range(self.grad_accum):
            indices = self._next_indices()
            mine = self.group.shard(indices)
            batch = self.collator(self.train_split, mine).to(self.device)
            # a rank's loss is the mean over its slice; weighting it by the slice's share makes
            # DDP's average of the ranks' gradients the gradient of the whole micro-batch's mean
            share = len(mine) * self.group.world / len(indices)
            last = micro == self.grad_accum - 1
            sync = self.group.accumulating(module) if not last else nullcontext()
            with sync:
                loss = self.forward_backward(batch, share / self.grad_accum, module)
            total.loss += loss * len(mine) / len(indices) / self.grad_accum
            total.tokens += batch.tokens
            total.tokens_with_padding += batch.tokens_with_padding
            total.examples += batch.size
        if self.group.distributed:
            loss, tokens, padded, examples = self.group.total(
                [total.loss, total.tokens, total.tokens_with_padding, total.examples]
            )
            total = StepResult(loss, int(tokens), int(padded), int(examples))
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(
            [p for g in self.optimizer.param_groups for p in g["params"]], MAX_GRAD_NORM
        )
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.position.step += 1
        return total

    def trial_pass(self, indices: list[int]) -> float:
        """Forward and backward on one batch without an optimizer step (smoke test, OOM probe)."""
        self.model.train()
        try:
            return self.forward_backward(
                self.collator(self.train_split, indices).to(self.device), 1.0
            )
        finally:
            self.optimizer.zero_grad(set_to_none=True)

    @property
    def learning_rate(self) -> float:
        return float(self.scheduler.get_last_lr()[0])

    @torch.no_grad()
    def evaluate(self, limit: int | None = None) -> Evaluation:
        """Validation loss and the task metric on the first ``limit`` held-out examples (all if None)."""
        self.model.eval()
        count = len(self.val_split) if limit is None else min(limit, len(self.val_split))
        order = sorted(range(count), key=lambda i: int(self.val_split.lengths[i]))
        size = max(1, self.micro_batch * 2)
        loss_sum, weight = 0.0, 0
        predictions: list[int] = []
        targets: list[int] = []
        for start in range(0, count, size):
            indices = order[start : start + size]
            batch = self.collator(self.val_split, indices).to(self.device)
            with self._autocast():
                out = self.model(**batch.inputs)
            if self.causal_lm:
                predicted = int((batch.inputs["labels"][:, 1:] != -100).sum())
                loss_sum += float(out.loss) * predicted
                weight += predicted
            else:
                loss_sum += float(out.loss) * batch.size
                weight += batch.size
                predictions.extend(out.logits.argmax(-1).tolist())
                targets.extend(batch.inputs["labels"].tolist())
        loss = loss_sum / max(weight, 1)
        if self.causal_lm:
            return Evaluation(loss=loss, perplexity=math.exp(min(loss, 50.0)))
        accuracy, macro_f1 = classification_metrics(predictions, targets, self.num_labels)
        return Evaluation(loss=loss, accuracy=accuracy, macro_f1=macro_f1)

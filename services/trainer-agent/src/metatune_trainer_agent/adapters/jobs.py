"""A job running on this agent: its assignment and held message, what it is told (pause, stop),
its progress so far and its background checkpoint uploads."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from faststream.nats.message import NatsMessage

from metatune.contracts import Assignment

from ..domain.points import StepBuffer
from ..domain.run import Control
from .uploads import LatestUploader


@dataclass
class Job:
    assignment: Assignment
    message: NatsMessage
    control: Control | None = None
    shutting_down: bool = False  # paused by our own shutdown: leave the message for redelivery
    step: int = 0
    last_progress: float = 0.0
    reported_checkpoint: int | None = None  # the checkpoint step the last progress event carried
    steps: StepBuffer = field(default_factory=StepBuffer)  # steps since the last progress event
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    uploader: LatestUploader | None = field(
        default=None, repr=False
    )  # checkpoints, in the background

"""The profiler service: ``metatune.datasets.submitted`` in, ``metatune.datasets.profiled`` out.

Thin handlers over :class:`~metatune_profiler.adapters.runtime.Profiler` (``service.runtime``):
fetch the dataset, profile it in a worker thread (the event loop keeps heartbeating), publish. An
unusable dataset becomes one typed error event; a file with a few bad rows is profiled and also
gets one error event per skip reason (count and first row numbers), so the submitter learns what
was left out.
"""

from __future__ import annotations

from faststream.nats.annotations import NatsMessage

from metatune import subjects
from metatune.contracts import DatasetSubmitted, DatasetValidation, DatasetValidationReply
from metatune.service import Service
from metatune.settings import Settings

from .adapters.runtime import Profiler
from .settings import ProfilerSettings


def create_service(settings: Settings | None = None) -> Service[Profiler]:
    settings = ProfilerSettings.of(settings)
    service: Service[Profiler] = Service("profiler", settings=settings)
    profiler = service.runtime = Profiler(service, settings)

    @service.consume(subjects.DATASETS_SUBMITTED_ALL, durable="profiler")
    async def on_submitted(event: DatasetSubmitted, message: NatsMessage) -> None:
        """Profile a submitted dataset into meta-features (a submission for another tenant than
        the one whose subject it came on is refused: ``foreign_tenant``)."""
        await profiler.profile(event, message)

    @service.broker.subscriber(subjects.DATASETS_VALIDATE_ALL, queue="profiler")
    async def on_validate(
        request: DatasetValidation, message: NatsMessage
    ) -> DatasetValidationReply:
        """Check a submission against its dataset before it is published (a core-NATS request,
        answered on the requester's inbox): the checks profiling starts with, nothing published.
        A tenant asks about its own studies only: its dataset is read from its own bucket."""
        return await profiler.validate(request, subjects.tenant_of(message.raw_message.subject))

    return service

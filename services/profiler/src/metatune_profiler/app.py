"""The profiler service: ``metatune.datasets.submitted`` in, ``metatune.datasets.profiled`` out.

Thin handler: fetch the dataset, run :func:`~metatune_profiler.domain.profile.profile_file` in a
worker thread (the event loop keeps heartbeating), publish. An unusable dataset becomes one
typed error event; a file with a few bad rows is profiled and also gets one error event per
skip reason (count and first row numbers), so the submitter learns what was left out.
"""

from __future__ import annotations

import asyncio

from faststream.nats.annotations import NatsMessage

from metatune import msgids, subjects
from metatune.bus.keepalive import while_working
from metatune.contracts import (
    DatasetProfiled,
    DatasetSubmitted,
    DatasetValidation,
    DatasetValidationReply,
    ErrorKind,
    StudySpec,
)
from metatune.service import Service
from metatune.settings import Settings
from metatune.tenancy import FOREIGN_TENANT, mislabelled

from .adapters.block_pool import block_map
from .adapters.fetch import DatasetFetcher
from .adapters.files import check_dataset, profile_file
from .domain.columns import ColumnRequest
from .domain.errors import ProfileError
from .domain.profile import ProfileOptions, ProfileResult
from .domain.validate import problem
from .settings import ProfilerSettings


def options_for(spec: StudySpec, settings: ProfilerSettings) -> ProfileOptions:
    return ProfileOptions(
        base_model=spec.base_model,
        columns=ColumnRequest(
            text=spec.text_column,
            text_pair=spec.text_pair_column,
            label=spec.label_column,
            task=spec.task,
        ),
        format=spec.dataset.format,
        max_file_bytes=settings.max_dataset_bytes,
        max_row_bytes=settings.max_row_bytes,
        max_skipped_fraction=settings.profiler_max_skipped_fraction,
        sample_size=settings.profiler_sample_size,
        seed=settings.profiler_seed,
        mattr_window=settings.profiler_mattr_window,
    )


def create_service(settings: Settings | None = None) -> Service:
    settings = ProfilerSettings.of(settings)
    service = Service("profiler", settings=settings)

    def fetcher() -> DatasetFetcher:
        return DatasetFetcher(
            objects=service.objects,
            download_dir=settings.resolved_data_dir() / "profiler" / "downloads",
            max_bytes=settings.max_dataset_bytes,
            settings=settings,
        )

    async def report_skips(event: DatasetSubmitted, result: ProfileResult) -> None:
        for reason, skipped in result.skipped.items():
            await service.report_error(
                code=reason,
                kind=ErrorKind.bad_input,
                subject=subjects.datasets_submitted(event.spec.tenant),
                correlation_id=event.study_id,
                row=skipped.first_rows[0],
                message=f"{skipped.count:,} of {result.rows_read:,} rows skipped ({reason}); first at row "
                f"{skipped.first_rows[0]}; the other rows were profiled",
                details={"rows": skipped.count, "first_rows": skipped.first_rows},
            )

    @service.consume(subjects.DATASETS_SUBMITTED_ALL, durable="profiler")
    async def on_submitted(event: DatasetSubmitted, message: NatsMessage) -> None:
        """Profile a submitted dataset into meta-features (a submission for another tenant than
        the one whose subject it came on is refused: ``foreign_tenant``)."""
        subject = message.raw_message.subject
        if (why := mislabelled(subjects.tenant_of(subject), event.spec.tenant)) is not None:
            await service.report_error(
                code=FOREIGN_TENANT, message=why, subject=subject, correlation_id=event.study_id
            )
            return
        options = options_for(event.spec, settings)

        async def fetch_and_profile() -> ProfileResult:
            async with fetcher().local_file(event.spec.dataset, event.spec.tenant) as path:
                blocks = block_map(settings.profiler_workers, path)
                return await asyncio.to_thread(profile_file, path, options, None, blocks)

        try:
            result = await while_working(message, fetch_and_profile(), settings.ack_wait_s / 3)
        except ProfileError as exc:
            await service.report_error(
                code=exc.code,
                message=exc.message,
                kind=ErrorKind.bad_input,
                subject=subject,
                correlation_id=event.study_id,
                row=exc.row,
                details=exc.details,
            )
            return
        await report_skips(event, result)
        profiled = DatasetProfiled(
            occurred_at=service.clock.now(),
            study_id=event.study_id,
            spec=event.spec,
            features=result.features,
            rows_skipped=result.rows_skipped,
            skip_reasons=result.skip_reasons,
        )
        # A redelivered submission republishes under the same id, which JetStream de-duplicates.
        await service.publish(
            subjects.DATASETS_PROFILED, profiled, msg_id=msgids.profiled(event.event_id)
        )

    @service.broker.subscriber(subjects.DATASETS_VALIDATE_ALL, queue="profiler")
    async def on_validate(
        request: DatasetValidation, message: NatsMessage
    ) -> DatasetValidationReply:
        """Check a submission against its dataset before it is published (a core-NATS request,
        answered on the requester's inbox): the checks profiling starts with, nothing published.
        A tenant asks about its own studies only: its dataset is read from its own bucket."""
        asked_by = subjects.tenant_of(message.raw_message.subject)
        if (why := mislabelled(asked_by, request.spec.tenant)) is not None:
            return DatasetValidationReply(problems=[why])
        options = options_for(request.spec, settings)
        try:
            async with fetcher().local_file(request.spec.dataset, request.spec.tenant) as path:
                problems = await asyncio.to_thread(check_dataset, path, options)
        except ProfileError as exc:  # not there, not allowed, too large
            problems = [problem(exc)]
        return DatasetValidationReply(problems=problems)

    return service

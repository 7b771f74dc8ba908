"""What the profiler's handlers call into: profile a submitted dataset, check one before it is
published. The dataset is fetched from its tenant's bucket (digest checked), profiled in a worker
thread while the message is kept alive, and the outcome published or reported as one error event."""

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
from metatune.tenancy import FOREIGN_TENANT, mislabelled

from ..domain.columns import ColumnRequest
from ..domain.errors import ProfileError
from ..domain.profile import ProfileOptions, ProfileResult
from ..domain.validate import problem
from ..settings import ProfilerSettings
from .block_pool import block_map
from .fetch import DatasetFetcher
from .files import check_dataset, profile_file


def options_for(spec: StudySpec, settings: ProfilerSettings) -> ProfileOptions:
    """What profiling a study's dataset takes: its columns and format, and the settings' limits."""
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


class Profiler:
    """The profiler service's runtime (``service.runtime``)."""

    def __init__(self, service: Service[Profiler], settings: ProfilerSettings) -> None:
        self.service = service
        self.settings = settings

    def fetcher(self) -> DatasetFetcher:
        """A fetcher over the service's object store (connected once the service runs)."""
        return DatasetFetcher(
            objects=self.service.objects,
            download_dir=self.settings.resolved_data_dir() / "profiler" / "downloads",
            max_bytes=self.settings.max_dataset_bytes,
            settings=self.settings,
        )

    async def profile(self, event: DatasetSubmitted, message: NatsMessage) -> None:
        """Profile a submitted dataset into meta-features and publish them; a submission for
        another tenant than its subject's is refused (``foreign_tenant``)."""
        subject = message.raw_message.subject
        if (why := mislabelled(subjects.tenant_of(subject), event.spec.tenant)) is not None:
            await self.service.report_error(
                code=FOREIGN_TENANT, message=why, subject=subject, correlation_id=event.study_id
            )
            return
        options = options_for(event.spec, self.settings)

        async def fetch_and_profile() -> ProfileResult:
            async with self.fetcher().local_file(event.spec.dataset, event.spec.tenant) as path:
                blocks = block_map(self.settings.profiler_workers, path)
                return await asyncio.to_thread(profile_file, path, options, None, blocks)

        try:
            result = await while_working(message, fetch_and_profile(), self.settings.ack_wait_s / 3)
        except ProfileError as exc:
            await self.service.report_error(
                code=exc.code,
                message=exc.message,
                kind=ErrorKind.bad_input,
                subject=subject,
                correlation_id=event.study_id,
                row=exc.row,
                details=exc.details,
            )
            return
        await self.report_skips(event, result)
        profiled = DatasetProfiled(
            occurred_at=self.service.clock.now(),
            study_id=event.study_id,
            spec=event.spec,
            features=result.features,
            rows_skipped=result.rows_skipped,
            skip_reasons=result.skip_reasons,
        )
        # A redelivered submission republishes under the same id, which JetStream de-duplicates.
        await self.service.publish(
            subjects.DATASETS_PROFILED, profiled, msg_id=msgids.profiled(event.event_id)
        )

    async def report_skips(self, event: DatasetSubmitted, result: ProfileResult) -> None:
        """One error event per skip reason: how many rows, the first row numbers."""
        for reason, skipped in result.skipped.items():
            await self.service.report_error(
                code=reason,
                kind=ErrorKind.bad_input,
                subject=subjects.datasets_submitted(event.spec.tenant),
                correlation_id=event.study_id,
                row=skipped.first_rows[0],
                message=f"{skipped.count:,} of {result.rows_read:,} rows skipped ({reason}); first at "
                f"row {skipped.first_rows[0]}; the other rows were profiled",
                details={"rows": skipped.count, "first_rows": skipped.first_rows},
            )

    async def validate(self, request: DatasetValidation, asked_by: str) -> DatasetValidationReply:
        """The checks profiling starts with, nothing published; a tenant asks about its own
        studies only (its dataset is read from its own bucket)."""
        if (why := mislabelled(asked_by, request.spec.tenant)) is not None:
            return DatasetValidationReply(problems=[why])
        options = options_for(request.spec, self.settings)
        try:
            async with self.fetcher().local_file(request.spec.dataset, request.spec.tenant) as path:
                problems = await asyncio.to_thread(check_dataset, path, options)
        except ProfileError as exc:  # not there, not allowed, too large
            problems = [problem(exc)]
        return DatasetValidationReply(problems=problems)

"""The profiler service: ``metatune.datasets.submitted`` in, ``metatune.datasets.profiled`` out.

Thin handler: fetch the dataset, run :func:`~metatune_profiler.domain.profile.profile_file` in a
worker thread (the event loop keeps heartbeating), publish. An unusable dataset becomes one
typed error event; a file with a few bad rows is profiled and also gets one error event per
skip reason (count and first row numbers), so the submitter learns what was left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from faststream.nats.annotations import NatsMessage
from metatune import subjects
from metatune.contracts import DatasetProfiled, DatasetSubmitted, ErrorKind, StudySpec
from metatune.service import Service
from metatune.settings import Settings

from .adapters.fetch import DatasetFetcher
from .domain.columns import ColumnRequest
from .domain.errors import ProfileError
from .domain.profile import ProfileOptions, ProfileResult, profile_file
from .settings import ProfilerSettings

Result = TypeVar("Result")


async def while_working(message: NatsMessage, work: Awaitable[Result], every_s: float) -> Result:
    """Await ``work``, telling JetStream every ``every_s`` that the message is still being handled,
    so a long profile (a 2 GB file takes minutes) is not redelivered after ``ack_wait``."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=every_s)
        if done:
            return task.result()
        await message.in_progress()


def options_for(spec: StudySpec, settings: Settings, profiler: ProfilerSettings) -> ProfileOptions:
    return ProfileOptions(
        base_model=spec.base_model,
        columns=ColumnRequest(text=spec.text_column, text_pair=spec.text_pair_column,
                              label=spec.label_column, task=spec.task),
        format=spec.dataset.format,
        max_file_bytes=settings.max_dataset_bytes,
        max_row_bytes=settings.max_row_bytes,
        max_skipped_fraction=profiler.max_skipped_fraction,
        sample_size=profiler.sample_size,
        seed=profiler.seed,
        mattr_window=profiler.mattr_window,
    )


def create_service(settings: Settings | None = None, profiler: ProfilerSettings | None = None) -> Service:
    service = Service("profiler", settings=settings)
    profiler = profiler or ProfilerSettings()

    def fetcher() -> DatasetFetcher:
        return DatasetFetcher(objects=service.objects, js=service.js,
                              download_dir=service.settings.resolved_data_dir() / "profiler" / "downloads",
                              max_bytes=service.settings.max_dataset_bytes, settings=profiler)

    async def report_skips(event: DatasetSubmitted, result: ProfileResult) -> None:
        for reason, skipped in result.skipped.items():
            await service.report_error(
                code=reason, kind=ErrorKind.bad_input, subject=subjects.DATASETS_SUBMITTED,
                correlation_id=event.study_id, row=skipped.first_rows[0],
                message=f"{skipped.count:,} of {result.rows_read:,} rows skipped ({reason}); first at row "
                        f"{skipped.first_rows[0]}; the other rows were profiled",
                details={"rows": skipped.count, "first_rows": skipped.first_rows},
            )

    @service.consume(subjects.DATASETS_SUBMITTED, durable="profiler")
    async def on_submitted(event: DatasetSubmitted, message: NatsMessage) -> None:
        """Profile a submitted dataset into meta-features."""
        options = options_for(event.spec, service.settings, profiler)

        async def fetch_and_profile() -> ProfileResult:
            async with fetcher().local_file(event.spec.dataset) as path:
                return await asyncio.to_thread(profile_file, path, options)

        try:
            result = await while_working(message, fetch_and_profile(), service.settings.ack_wait_s / 3)
        except ProfileError as exc:
            await service.report_error(
                code=exc.code, message=exc.message, kind=ErrorKind.bad_input,
                subject=subjects.DATASETS_SUBMITTED, correlation_id=event.study_id, row=exc.row,
                details=exc.details,
            )
            return
        await report_skips(event, result)
        profiled = DatasetProfiled(
            occurred_at=service.clock.now(), study_id=event.study_id, spec=event.spec,
            features=result.features, rows_skipped=result.rows_skipped, skip_reasons=result.skip_reasons,
        )
        # A redelivered submission republishes under the same id, which JetStream de-duplicates.
        await service.publish(subjects.DATASETS_PROFILED, profiled, msg_id=f"profiled-{event.event_id}")

    return service


service = create_service()
app = service.app

"""The asynchronous client: what ``metatune submit|study|results|cancel|adapter`` do, from Python.

It reads the event log as the admin (``study``, ``results``, ``adapter`` answer from it) and
publishes as the submitter (a submission, a cancellation), over connections opened on first use
and kept until :meth:`AsyncClient.aclose` (``async with`` closes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit
from uuid import UUID

from nats.aio.client import Client as Nats
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from pydantic import BaseModel, ValidationError

from metatune import subjects
from metatune.bus import ADAPTERS_BUCKET, ObjectStore, headers_for
from metatune.bus.auth import ADMIN
from metatune.bus.clock import load_anchor
from metatune.bus.connection import connect_as
from metatune.bus.streams import ensure_bucket, stream_for
from metatune.clock import Clock, RealClock, SimulatedClock
from metatune.contracts import (
    Contract,
    DatasetSubmitted,
    DatasetValidation,
    DatasetValidationReply,
    Event,
    JobCancelled,
    JobLookup,
    JobLookupReply,
    JobRequested,
    StudyCancelled,
)
from metatune.errors import ObjectNotFound
from metatune.settings import Settings, get_settings
from metatune.tenancy import datasets_bucket, submitter_user

from ..study_file import future_deadline
from .adapters import CARD, make_hub_ready, unpack
from .emissions import load_observed, realised
from .errors import InvalidRequest, NotFound, StillRunning
from .eventlog import events_of, logged_events
from .models import (
    AdapterDownload,
    Cancellation,
    Progress,
    Receipt,
    StudyCancellation,
    StudyDetail,
    StudySummary,
    TrialResult,
)
from .studies import Study, fold
from .submission import Draft, draft, resolve
from .validation import parse_id

POLL_S = 3.0  # how often a wait reads the log again
CANCEL_REASON = "cancelled by the user"
LOOKUP_TIMEOUT_S = 1.0  # the scheduler answers from memory: silence means it is down
VALIDATE_TIMEOUT_S = 5.0  # the profiler downloads the dataset first; silence: publish anyway
ENDED = ("finished", "cancelled")  # a job in these states has nothing left to cancel

Reply = TypeVar("Reply", bound=BaseModel)


class AsyncClient:
    """``async with AsyncClient() as client: receipt = await client.submit("data.jsonl")``.

    ``settings`` default to the environment's (``METATUNE_*``), as the CLI's do. Every error is a
    :class:`~metatune.errors.MetaTuneError`: :class:`~metatune.errors.BusUnavailable` when NATS
    does not answer, :class:`InvalidRequest`, :class:`NotFound`, :class:`StillRunning`."""

    def __init__(self, settings: Settings | None = None, *, poll_s: float = POLL_S) -> None:
        self.settings = settings or get_settings()
        self.poll_s = poll_s
        # who this client submits as: its tenant's credential and datasets bucket
        self.submitter = submitter_user(self.settings.tenant)
        self.datasets_bucket = datasets_bucket(self.settings.tenant)
        self._connections: dict[str, Nats] = {}
        self._connecting = asyncio.Lock()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for nc in connections:
            await nc.close()

    async def _js(self, user: str) -> JetStreamContext:
        """JetStream over ``user``'s connection: opened on first use, again once it dropped."""
        async with self._connecting:
            nc = self._connections.get(user)
            if nc is None or nc.is_closed:
                nc = self._connections[user] = await connect_as(self.settings, user)
        return nc.jetstream()

    # -- submitting -------------------------------------------------------------------------------

    async def submit(
        self,
        source: Path | str | None = None,
        *,
        object_key: str | None = None,
        allow_dataset_outside: bool = False,
        **options: Any,
    ) -> Receipt:
        """Request a study of ``source`` (a dataset file, uploaded, or a study file naming one) or
        of the dataset already in the datasets bucket under ``object_key``. ``options`` are the
        study file's fields (``trials=2``, ``deadline="3d"``, ``tags=["nlp"]``...); they override a
        study file's, and the defaults fill what both leave out. A study file's dataset must lie
        in the file's folder unless ``allow_dataset_outside``."""
        path = None if source is None else Path(source)
        sources = resolve(path, object_key, options, allow_dataset_outside=allow_dataset_outside)
        return await self.submit_draft(draft(sources, self.settings))

    async def submit_draft(self, checked: Draft) -> Receipt:
        """Upload the draft's dataset (or check the stored one is there) and publish the
        submission, its deadline read against the platform's clock."""
        js = await self._js(self.submitter)
        clock = await platform_clock(js)
        deadline = _deadline(checked.deadline, clock)  # refused before anything is uploaded
        objects, bucket = ObjectStore(js), self.datasets_bucket
        key = checked.spec.dataset.ref
        if checked.dataset is not None:
            await ensure_bucket(js, bucket, self.settings)  # a new tenant's first upload
            if await objects.exists(bucket, key):  # written once: never over a dataset in use
                raise InvalidRequest(
                    f"{bucket}/{key} already exists: datasets are written once; submit under a "
                    "new key (or name the stored one with --object-key)"
                )
            sha: str | None = await objects.put_file(bucket, key, checked.dataset)
            size = checked.dataset.stat().st_size
        else:  # already in the bucket: checked, not uploaded again
            try:
                size, sha = await objects.stat(bucket, key)
            except ObjectNotFound as exc:
                raise InvalidRequest(f"{checked.missing_key}{exc}") from None
        try:
            event = _submission(checked, size, sha, deadline, clock, self.settings.tenant)
            skipped = await self._validate(event)
        except InvalidRequest:
            if checked.dataset is not None:  # refused: what this call uploaded does not stay
                await _discard(objects, bucket, key)
            raise
        await self._publish(js, subjects.datasets_submitted(self.settings.tenant), event)
        return Receipt(
            study_id=checked.study_id,
            dataset=event.spec.dataset,
            event_id=event.event_id,
            validation="skipped" if skipped else "passed",
            validation_note=skipped,
        )

    async def _validate(self, event: DatasetSubmitted) -> str | None:
        """The profiler checks the dataset against the spec (columns, format) before anything is
        published: its problems are :class:`InvalidRequest`. Without an answer in time (a dataset
        too large to download and check in :data:`VALIDATE_TIMEOUT_S`, no profiler running) the
        check is skipped, and this says so in one line: the profiler checks the dataset when it
        takes the submission and reports on ``metatune.errors.profiler``."""
        checked = await self._ask(
            subjects.datasets_validate(self.settings.tenant),
            DatasetValidation(spec=event.spec),
            DatasetValidationReply,
            VALIDATE_TIMEOUT_S,
        )
        if isinstance(checked, str):
            return (
                f"validation skipped: {checked}; the dataset is published unchecked and the profiler "
                f"checks it when it takes the submission (its problems: metatune events --study "
                f"{event.study_id} --kind errors)"
            )
        if checked.problems:
            raise InvalidRequest("\n".join(checked.problems))
        return None

    async def _request(
        self, subject: str, request: Contract, reply: type[Reply], timeout_s: float
    ) -> Reply | None:
        """A core-NATS request as the submitter (the answer comes to its own inbox); None when no
        one answers in time (no responder, a timeout, a reply that is not ``reply``)."""
        answered = await self._ask(subject, request, reply, timeout_s)
        return None if isinstance(answered, str) else answered

    async def _ask(
        self, subject: str, request: Contract, reply: type[Reply], timeout_s: float
    ) -> Reply | str:
        """:meth:`_request`, saying why there is no answer instead of None."""
        await self._js(self.submitter)  # opens the connection
        nc = self._connections[self.submitter]
        try:
            msg = await nc.request(subject, request.model_dump_json().encode(), timeout=timeout_s)
            return reply.model_validate_json(msg.data)
        except NoRespondersError:
            return f"no one answers on {subject}"
        except (NatsError, TimeoutError):
            return f"no answer on {subject} within {timeout_s:g} s"
        except ValidationError:
            return f"the answer on {subject} is not a {reply.__name__}"

    async def _publish(self, js: JetStreamContext, subject: str, event: Event) -> None:
        await js.publish(
            subject,
            event.to_bytes(),
            headers=headers_for(event),
            stream=stream_for(subject, self.settings),
        )

    # -- reading the log --------------------------------------------------------------------------

    async def _studies(self) -> dict[UUID, Study]:
        js = await self._js(ADMIN)
        log = await logged_events(js, self.settings.stream_name)
        return fold((logged.subject, logged.event) for logged in log)

    async def _find(self, value: UUID | str) -> Study:
        """The study whose id is ``value`` or starts with it (``study list`` shows the first 8
        characters); a prefix must name exactly one study."""
        wanted = _id_or_prefix(value, "study")
        studies = await self._studies()
        if isinstance(wanted, str):
            matches = [s for sid, s in studies.items() if str(sid).startswith(wanted)]
            return _one(matches, wanted, "study", "studies")
        study = studies.get(wanted)
        if study is None:
            raise NotFound(f"no study {wanted} in the event log")
        return study

    async def _find_job(self, value: UUID | str) -> tuple[Study, UUID]:
        """The study of the job whose id is ``value`` or starts with it (a narrow terminal shows
        only the first characters of ``results``' job column), and the job's id; a prefix must
        name exactly one job."""
        wanted = _id_or_prefix(value, "job")
        jobs = [(s, job) for s in (await self._studies()).values() for job in s.trials]
        if isinstance(wanted, str):
            matches = [(s, job) for s, job in jobs if str(job).startswith(wanted)]
            return _one(matches, wanted, "job", "jobs")
        found = next((s for s, job in jobs if job == wanted), None)
        if found is None:
            raise NotFound(f"no job {wanted} in the event log")
        return found, wanted

    async def study_id(self, study: UUID | str) -> UUID:
        """The id ``study`` names: a whole id as it is (the study need not be in the log yet, as
        when a wait starts right after the submission); for a prefix, the id of the one study
        whose id starts with it (none or several: :class:`NotFound`)."""
        wanted = _id_or_prefix(study, "study")
        return wanted if isinstance(wanted, UUID) else (await self._find(wanted)).study_id

    async def studies(self, tags: Iterable[str] = ()) -> list[StudySummary]:
        """Every study in the event log, oldest first; with ``tags``, those filed under all."""
        wanted = set(tags)
        summaries = [s.summary() for s in (await self._studies()).values()]
        return [s for s in summaries if wanted <= set(s.tags)]

    async def study(self, study: UUID | str) -> StudyDetail:
        """One study (its id, or a unique prefix of it): submission, profile, each trial with its
        prediction and outcome, and why it stopped."""
        return (await self._find(study)).details()

    async def results(self, study: UUID | str) -> list[TrialResult]:
        """The study's trials with their emissions as charged and as realised."""
        return await self._results(await self._find(study))

    async def _results(self, study: Study) -> list[TrialResult]:
        found = study.ordered_trials()
        registry = self.settings.registry()
        region_of = {dc.name: dc.region for dc in registry.datacenters}
        accountings = [
            t.completed.accounting if t.completed else t.failed.accounting if t.failed else None
            for t in found
        ]
        regions = {
            region_of[h.datacenter]
            for a in accountings
            if a is not None
            for h in a.hours
            if h.datacenter in region_of
        }
        js = await self._js(ADMIN)
        observed = await load_observed(js, self.settings.stream_name, regions)
        results = []
        for trial, accounting in zip(found, accountings, strict=True):
            summary = trial.summary(study.chance_baseline)
            extra = realised(accounting, region_of, observed, summary.datacenter)
            results.append(TrialResult(**dict(summary), **extra))
        return results

    # -- following a study ------------------------------------------------------------------------

    async def progress(
        self, study_id: UUID | str, *, timeout_s: float | None = None
    ) -> AsyncGenerator[Progress, None]:
        """Where the study stands, each time that changes, ending with it finished (the
        recommender requests no more trials and every trial has ended). Past ``timeout_s``:
        :class:`StillRunning` (the study goes on). ``study_id``: as :meth:`study_id` takes it."""
        sid = await self.study_id(study_id)
        give_up = None if timeout_s is None else time.monotonic() + timeout_s
        last = None
        while True:
            study = (await self._studies()).get(sid)
            now = Progress(sid, study.summary() if study else None, bool(study and study.finished))
            if last is None or now.line != last.line or now.finished != last.finished:
                yield now
                last = now
            if now.finished:
                return
            if give_up is not None and time.monotonic() >= give_up:
                raise StillRunning(sid, timeout_s or 0.0)
            pause = self.poll_s
            if give_up is not None:
                pause = min(pause, max(0.0, give_up - time.monotonic()))
            await asyncio.sleep(pause)

    async def wait(
        self,
        study_id: UUID | str,
        *,
        timeout_s: float | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> StudyDetail:
        """The study once finished; each change of where it stands goes to ``on_progress``."""
        async for update in self.progress(study_id, timeout_s=timeout_s):
            if on_progress is not None:
                on_progress(update)
        return await self.study(update.study_id)

    # -- cancelling -------------------------------------------------------------------------------

    async def cancel(self, job: UUID | str, reason: str = CANCEL_REASON) -> Cancellation:
        """Withdraw a requested job (the scheduler stops it wherever it runs).

        The scheduler is asked first where the job stands: one it has never seen requested is
        :class:`NotFound` (a caller that may read the event log looks there too: the scheduler may
        not have folded a request of an instant ago); one that has already ended is not cancelled
        again (``event_id`` None, ``state`` says how it ended). When the scheduler does not
        answer, the event log is read instead, unless this process logs in as one user that may
        not read it (an external submitter); then nothing is checked, and ``check_skipped`` says
        why."""
        job_id = parse_id(job, "job")
        found = await self._request(
            subjects.jobs_lookup(self.settings.tenant),
            JobLookup(job_id=job_id),
            JobLookupReply,
            LOOKUP_TIMEOUT_S,
        )
        if found is not None and not found.known and not _reads_log(self.settings):
            raise NotFound(f"no job {job_id}: the scheduler has never seen it requested")
        if found is not None and found.state in ENDED:
            return Cancellation(event_id=None, job_id=job_id, reason=reason, state=found.state)
        skipped = None
        if found is None or not found.known:  # no answer, or a request not folded yet?
            skipped = await self._check_requested(job_id)
        js = await self._js(self.submitter)
        cancellation = await self._cancel(js, job_id, reason)
        state = found.state if found else None
        return cancellation.model_copy(update={"check_skipped": skipped, "state": state})

    async def _check_requested(self, job_id: UUID) -> str | None:
        """Look for the job's request in the log (as the admin); why not, when it cannot."""
        if not _reads_log(self.settings):
            return "no answer from the scheduler, and the submitter may not read the event log"
        wanted: dict[str, type[Event]] = {subjects.JOBS_REQUESTED: JobRequested}
        try:
            js = await self._js(ADMIN)
            requested = await events_of(js, self.settings.stream_name, wanted)
        except (NatsError, TimeoutError) as exc:
            return type(exc).__name__
        if not any(isinstance(e, JobRequested) and e.job_id == job_id for e in requested):
            raise NotFound(f"no job {job_id} in the event log")
        return None

    async def _cancel(
        self, js: JetStreamContext, job_id: UUID, reason: str, study_id: UUID | None = None
    ) -> Cancellation:
        clock = await platform_clock(js)
        try:
            event = JobCancelled(
                occurred_at=clock.now(),
                job_id=job_id,
                study_id=study_id,
                tenant=self.settings.tenant,
                reason=reason,
            )
        except ValueError as exc:
            raise InvalidRequest(f"invalid cancellation: {exc}") from None
        await self._publish(js, subjects.jobs_cancelled(self.settings.tenant), event)
        return Cancellation(event_id=event.event_id, job_id=job_id, reason=reason)

    async def cancel_study(
        self, study: UUID | str, reason: str = CANCEL_REASON
    ) -> StudyCancellation:
        """Cancel a whole study: a StudyCancelled first (the recommender requests none of its
        trials afterwards and stops it, reason ``cancelled``), then a JobCancelled for every
        trial that has not ended (read from the log as the admin)."""
        found = await self._find(study)
        js = await self._js(self.submitter)
        clock = await platform_clock(js)
        try:
            event = StudyCancelled(
                occurred_at=clock.now(),
                study_id=found.study_id,
                tenant=self.settings.tenant,
                reason=reason,
            )
        except ValueError as exc:
            raise InvalidRequest(f"invalid cancellation: {exc}") from None
        await self._publish(js, subjects.studies_cancelled(self.settings.tenant), event)
        cancelled = [
            await self._cancel(js, t.job_id, reason, found.study_id)
            for t in found.ordered_trials()
            if t.status == "requested"
        ]
        return StudyCancellation(
            event_id=event.event_id, study_id=found.study_id, reason=reason, cancelled=cancelled
        )

    # -- adapters ---------------------------------------------------------------------------------

    async def download_adapter(self, job: UUID | str, out: Path | str) -> AdapterDownload:
        """The trained adapter of a completed job, written to ``out`` (new or empty) with a Hugging
        Face model card; it loads with ``peft.PeftModel.from_pretrained(base_model, out)``."""
        out = Path(out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise InvalidRequest(f"{out} exists and is not an empty directory")
        study, job_id = await self._find_job(job)
        trial = study.trials[job_id]
        run = trial.completed
        if run is None or run.adapter_key is None:
            raise NotFound(f"job {job_id} has no adapter: it is {trial.status}")
        submitted = study.submitted or study.profiled
        registry = self.settings.registry()
        regions = {dc.name: dc.region for dc in registry.datacenters}
        js = await self._js(ADMIN)
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "adapter.tar"
            try:
                await ObjectStore(js).get_to_file(ADAPTERS_BUCKET, run.adapter_key, archive)
            except ObjectNotFound as exc:
                raise NotFound(str(exc)) from None
            metadata = unpack(archive, out)
        labels = [str(name) for name in metadata.get("labels") or []]
        make_hub_ready(out, run, submitted.spec if submitted else None, labels, regions)
        return AdapterDownload(
            job_id=job_id,
            key=f"{ADAPTERS_BUCKET}/{run.adapter_key}",
            out=out,
            files=sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()),
            metadata=metadata,
            card=CARD,
            labels=labels,
        )


def _id_or_prefix(value: UUID | str, what: str) -> UUID | str:
    """``value`` as a whole id, or, shorter, the prefix of one (lower case); anything else is
    :class:`InvalidRequest` saying what a ``what`` id looks like."""
    text = str(value).strip().lower()
    if len(text) >= 36:
        return parse_id(value, what)
    if not text or any(c not in "0123456789abcdef-" for c in text):
        parse_id(str(value), what)  # raises, saying what an id looks like
    return text


Found = TypeVar("Found")


def _one(matches: list[Found], prefix: str, one: str, many: str) -> Found:
    """The one match of an id prefix; none or several (``one``, ``many``: what they are) is
    :class:`NotFound`."""
    if len(matches) != 1:
        found = f"no {one}" if not matches else f"{len(matches)} {many}"
        raise NotFound(f"{found} with an id starting {prefix!r} in the event log")
    return matches[0]


def _reads_log(settings: Settings) -> bool:
    """Whether this process may read the event log: not when it logs in as one fixed user other
    than the admin (an nkey file: the submitter's; a user named in the URL or the settings), whose
    read the server refuses only after a timeout."""
    if settings.nats_nkey_file:
        return False
    named = urlsplit(settings.nats_url).username or (
        settings.nats_user if settings.nats_password_file else ""
    )
    return not named or named == ADMIN


def _deadline(text: str, clock: Clock) -> datetime:
    """The draft's deadline read against the platform's clock; one too far ahead, or not after
    the clock's now, is :class:`InvalidRequest`."""
    try:
        return future_deadline(text, clock.now())
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None


def _submission(
    checked: Draft, size: int, sha: str | None, deadline: datetime, clock: Clock, tenant: str
) -> DatasetSubmitted:
    """The submission of ``checked``, its dataset's size and digest as stored, ``deadline``, for
    ``tenant`` (the client's: the one whose bucket holds the dataset); a value the contract
    refuses is :class:`InvalidRequest`."""
    try:
        spec = checked.spec.model_copy(
            update={
                "tenant": tenant,
                "dataset": checked.spec.dataset.model_copy(
                    update={"size_bytes": size, "sha256": sha}
                ),
                "deadline": deadline,
            }
        )
        return DatasetSubmitted(occurred_at=clock.now(), study_id=checked.study_id, spec=spec)
    except ValueError as exc:  # contract validation of the caller's options
        raise InvalidRequest(f"invalid submission: {exc}") from None


async def _discard(objects: ObjectStore, bucket: str, key: str) -> None:
    """Remove a refused submission's upload (the tenant's write grant on its datasets bucket
    covers it). When the bus fails meanwhile the refusal still stands; the object stays."""
    with contextlib.suppress(NatsError, TimeoutError):
        await objects.delete(bucket, key)


async def platform_clock(js: JetStreamContext) -> Clock:
    """The platform's clock: the simulated one whose anchor is in KV, else real time."""
    anchor = await load_anchor(js)
    return SimulatedClock(anchor) if anchor else RealClock()


__all__ = ["AsyncClient", "platform_clock"]

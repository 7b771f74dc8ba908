"""The request/reply channels: core NATS (never stored in JetStream), answered by one service of a
queue group on the requester's own inbox (``_INBOX_<public key>.>``), so an outside publisher that
may read no subject still hears back. Documented beside the event channels of the catalog."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from metatune import contracts as c
from metatune import subjects
from metatune.bus.auth import ADMIN
from metatune.catalog import SUBMITTER

from .examples import JOB, SPEC, STUDY

Doc = dict[str, Any]


@dataclass(frozen=True)
class RequestChannel:
    id: str
    subject: str
    request: c.Contract
    reply: c.Contract
    summary: str
    requesters: tuple[str, ...]
    responder: str  # the service answering (its queue group has its name)
    example: str  # what the example pair shows

    @property
    def reply_id(self) -> str:
        return f"{self.id}-reply"


REQUESTS = [
    RequestChannel(
        "jobs-lookup",
        "metatune.requests.jobs.lookup.{tenant}",
        c.JobLookup(job_id=JOB),
        c.JobLookupReply(job_id=JOB, known=True, study_id=STUDY, state="running"),
        "Where a job stands: `metatune cancel` asks before it publishes a cancellation.",
        (SUBMITTER,),
        "scheduler",
        "a running job",
    ),
    RequestChannel(
        "datasets-validate",
        "metatune.requests.datasets.validate.{tenant}",
        c.DatasetValidation(spec=SPEC.model_copy(update={"label_column": "nope"})),
        c.DatasetValidationReply(
            problems=[
                "label_column: label column 'nope' is not in the dataset (columns: text, label)"
            ]
        ),
        "A submission checked against its dataset (format, columns) before it is published.",
        (SUBMITTER,),
        "profiler",
        "a label column the dataset does not have",
    ),
    RequestChannel(
        "knowledge-runs",
        subjects.KNOWLEDGE_RUNS,
        c.KnowledgeRuns(study_ids=[STUDY]),
        c.KnowledgeRunsReply(runs={STUDY: 3}),
        "How many runs of these studies the knowledge base holds: `metatune demo` waits until "
        "every finished trial has landed there.",
        (ADMIN,),
        "recommender",
        "a study whose three trials are in the knowledge base",
    ),
    RequestChannel(
        "knowledge-evidence",
        subjects.KNOWLEDGE_EVIDENCE,
        c.KnowledgeEvidence(study_ids=[STUDY]),
        c.KnowledgeEvidenceReply(
            evidence={
                STUDY: c.StudyEvidence(
                    base_model=SPEC.base_model,
                    metric_name="accuracy",
                    budget="2 epochs over 1500 rows, 128 tokens, cuda",
                    nearest=[
                        c.NearestDataset(
                            dataset="snips_intents",
                            similarity=0.412,
                            best_measured=0.975,
                            runs=48,
                            majority_baseline=0.143,
                        )
                    ],
                )
            }
        ),
        "What the knowledge base measured on the datasets nearest each study's: `metatune demo` "
        "sets it beside each study's best trial and its prediction.",
        (ADMIN,),
        "recommender",
        "a study whose nearest measured dataset is snips_intents",
    ),
]

HOW = (
    "Core NATS request/reply, not stored in JetStream: publish the request with a reply subject "
    "under your own inbox prefix (`_INBOX_<public key>`); one {responder} (queue group "
    "`{responder}`) answers there. No answer (no responder, a timeout): go on without it."
)


def channels() -> Doc:
    doc: Doc = {}
    for rc in REQUESTS:
        how = HOW.format(responder=rc.responder)
        doc[rc.id] = {
            "address": rc.subject,
            "title": rc.subject,
            "summary": rc.summary,
            "description": f"{rc.summary} {how} Sent by: {', '.join(rc.requesters)}. "
            f"Answered by: {rc.responder}.",
            "messages": {_name(rc.request): _ref(rc.request)},
        }
        if "{tenant}" in rc.subject:  # a tenant asks on its own subject (metatune.tenancy)
            doc[rc.id]["parameters"] = {"tenant": {"$ref": "#/components/parameters/tenant"}}
        doc[rc.reply_id] = {
            "address": None,  # the requester's inbox, chosen per request
            "title": f"reply to {rc.subject}",
            "summary": f"The {rc.responder}'s answer, on the requester's inbox.",
            "messages": {_name(rc.reply): _ref(rc.reply)},
        }
    return doc


def operations() -> Iterator[tuple[str, Doc]]:
    for rc in REQUESTS:
        request = [{"$ref": f"#/channels/{rc.id}/messages/{_name(rc.request)}"}]
        reply = {
            "channel": {"$ref": f"#/channels/{rc.reply_id}"},
            "messages": [{"$ref": f"#/channels/{rc.reply_id}/messages/{_name(rc.reply)}"}],
        }
        for service in rc.requesters:
            yield (
                f"{service}-request-{rc.id}",
                {
                    "action": "send",
                    "channel": {"$ref": f"#/channels/{rc.id}"},
                    "messages": request,
                    "reply": reply,
                    "title": f"{service} asks {_name(rc.request)}",
                    "summary": f"A core NATS request; the {rc.responder} replies with "
                    f"{_name(rc.reply)}.",
                    "tags": [{"name": service}],
                },
            )
        yield (
            f"{rc.responder}-reply-{rc.id}",
            {
                "action": "receive",
                "channel": {"$ref": f"#/channels/{rc.id}"},
                "messages": request,
                "reply": reply,
                "title": f"{rc.responder} answers {_name(rc.request)}",
                "summary": f"A queue subscription (group {rc.responder}); the reply goes to the "
                "request's reply subject.",
                "tags": [{"name": rc.responder}],
            },
        )


HEADERS: Doc = {
    "type": "object",
    "properties": {
        "content-type": {
            "type": "string",
            "const": "application/json",
            "description": "optional; the body is JSON either way",
        }
    },
}


def messages() -> Doc:
    doc: Doc = {}
    for rc in REQUESTS:
        for model, summary in (
            (rc.request, rc.summary),
            (rc.reply, f"The answer to {rc.subject}."),
        ):
            name = _name(model)
            doc[name] = {
                "name": name,
                "title": name,
                "summary": summary,
                "description": (type(model).__doc__ or summary).strip(),
                "contentType": "application/json",
                "headers": HEADERS,
                "payload": {"$ref": f"#/components/schemas/{name}"},
                "examples": [
                    {
                        "name": name,
                        "summary": rc.example,
                        "headers": {"content-type": "application/json"},
                        "payload": model.model_dump(mode="json"),
                    }
                ],
            }
    return doc


def models() -> list[type[c.Contract]]:
    return [type(m) for rc in REQUESTS for m in (rc.request, rc.reply)]


def _name(model: c.Contract) -> str:
    return type(model).__name__


def _ref(model: c.Contract) -> Doc:
    return {"$ref": f"#/components/messages/{_name(model)}"}

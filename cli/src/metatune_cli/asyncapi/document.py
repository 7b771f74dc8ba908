"""Build the AsyncAPI 3.0 document from the catalog, the contracts, the stream layout and the registry.

Payload schemas are the contracts' own JSON Schemas (pydantic, validation mode), so what the
document requires is what a consumer requires, plus ``event_id``, which every producer must send.
"""

from __future__ import annotations

from typing import Any

from nats.js.api import RetentionPolicy, StreamConfig
from pydantic.json_schema import models_json_schema

from metatune import __version__
from metatune.bus.streams import stream_configs, stream_for
from metatune.catalog import CATALOG, SERVICES, Channel
from metatune.registry import Registry
from metatune.settings import Settings
from metatune.tenancy import DEFAULT_TENANT

from . import requests
from .examples import JOB, Example, examples

Doc = dict[str, Any]
SCHEMAS = "#/components/schemas/"

DESCRIPTION = """Events of the MetaTune carbon-aware LoRA fine-tuning platform, on NATS JetStream.

* Every message is a JSON contract with `event_id`, timezone-aware UTC `occurred_at`, `schema_version` and `correlation_id` (the study or job id).
* Publish into JetStream (not core NATS) with the header `Nats-Msg-Id`: the event's `event_id` unless the channel says how its producer derives it. A second publish with the same id inside the stream's de-duplication window is stored once.
* Unknown fields are an error. Anything invalid comes back as an error event on `metatune.errors.<service>`.
* Datasets, checkpoints and adapters are in the object store buckets `datasets`, `checkpoints` and `adapters`.
* Tenants: each team has its own submitter (`submitter.<tenant>`, written by `metatune secrets --tenant`; `submitter` is the default tenant's) that publishes the submitter's channels below and writes only its own datasets bucket (`datasets-<tenant>`, created by its first upload); the profiler and the agents read every tenant's bucket. A study belongs to the tenant its spec names (`spec.tenant`), and its dataset is read from that tenant's bucket only.
* Three channels are core NATS request/reply instead (`metatune.requests.>`, never stored): a submitter asks the scheduler where a job stands and the profiler to check a submission, and hears back on its own inbox; the admin's tools (the demo) ask the recommender how many runs of a study its knowledge base holds.
"""

PARAMETERS = {
    "region": "grid region (Electricity Maps zone id), as in the datacenter registry",
    "datacenter": "datacenter name from the registry (shared/src/metatune/data/datacenters.toml)",
    "job_id": "the job (trial) UUID",
    "service": "the service that reports the error",
    "tenant": "the team publishing (its credential may publish only under its own name; "
    "`default` is the submitter that predates tenants)",
}


# How a client proves who it is to the NATS server; the server's auth.conf then grants each user
# only the subjects the catalog lists for it (least privilege)
SECURITY_SCHEMES: Doc = {
    "nkey": {
        "type": "asymmetricEncryption",
        "description": "NATS NKey: each service, each datacenter's agent and each tenant's "
        "submitter sign the "
        "server's nonce with their own Ed25519 seed (`metatune secrets` writes one file per user, "
        "mode 0600, into METATUNE_NATS_SECRETS_DIR; the public key is in auth.conf)",
    },
    "userPassword": {
        "type": "userPassword",
        "description": "the admin (`metatune bus-init` and the platform commands): user `admin`, "
        "its password from the secrets directory (`admin.password`); never a service",
    },
}
SECURITY = [
    {"$ref": "#/components/securitySchemes/nkey"},
    {"$ref": "#/components/securitySchemes/userPassword"},
]


def build(settings: Settings, registry: Registry) -> Doc:
    streams = {config.name: config for config in stream_configs(settings)}
    by_model = {type(e.event): e for e in examples()}
    values = {
        "region": registry.regions(),
        "datacenter": registry.names(),
        "job_id": [str(JOB)],
        "service": list(SERVICES),
        "tenant": [DEFAULT_TENANT, "team-a"],
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "MetaTune",
            "version": __version__,
            "description": DESCRIPTION,
            "license": {"name": "Apache-2.0"},
            "tags": [
                {"name": name, "description": f"operations of the {name}"}
                for name in _participants()
            ],
        },
        "defaultContentType": "application/json",
        "servers": {
            "local": {
                "host": "127.0.0.1:4222",
                "protocol": "nats",
                "description": "`metatune up`: the configured NATS, or an embedded one with auth on",
                "security": SECURITY,
            },
            "compose": {
                "host": "nats:4222",
                "protocol": "nats",
                "description": "compose/docker-compose.yml: one NATS user per service, agent and submitter",
                "security": SECURITY,
            },
        },
        "channels": {
            **{ch.id: _channel(ch, streams[stream_for(ch.subject, settings)]) for ch in CATALOG},
            **requests.channels(),
        },
        "operations": {
            **dict(
                op for ch in CATALOG for op in _operations(ch, stream_for(ch.subject, settings))
            ),
            **dict(requests.operations()),
        },
        "components": {
            "securitySchemes": SECURITY_SCHEMES,
            "schemas": _schemas(),
            "messages": {
                **{ch.model.__name__: _message(ch, by_model[ch.model]) for ch in CATALOG},
                **requests.messages(),
            },
            "parameters": {
                name: {
                    "description": text,
                    "examples": values[name],
                    # a tenant is named by a cancellation's payload, a submission's spec
                    **({} if name == "tenant" else {"location": f"$message.payload#/{name}"}),
                }
                for name, text in PARAMETERS.items()
            },
            "correlationIds": {
                "study-or-job": {
                    "description": "the study or job the event belongs to: set by the producer, else the payload's job_id, "
                    "else its study_id",
                    "location": "$message.payload#/correlation_id",
                }
            },
        },
        "x-jetstream-streams": {name: _stream(config) for name, config in streams.items()},
    }


def _participants() -> list[str]:
    names = [n for ch in CATALOG for n in (*ch.senders, *(r.service for r in ch.receivers))]
    names += [n for rc in requests.REQUESTS for n in (*rc.requesters, rc.responder)]
    return sorted(set(names))


def _stream(config: StreamConfig) -> Doc:
    retention = config.retention or RetentionPolicy.LIMITS
    return {
        "subjects": list(config.subjects or []),
        "retention": retention.value,
        "storage": config.storage.value if config.storage else "file",
        "max_age_s": config.max_age,
        "duplicate_window_s": config.duplicate_window,
        "max_msgs_per_subject": config.max_msgs_per_subject or -1,
        "replicas": config.num_replicas,
    }


def _retention(config: StreamConfig) -> str:
    days = (config.max_age or 0) / 86400
    limit = config.max_msgs_per_subject or -1
    per_subject = f", the last {limit} per subject" if limit > 0 else ""
    return (
        f"Stored in JetStream stream `{config.name}` ({(config.retention or RetentionPolicy.LIMITS).value} "
        f"retention: {days:g} days{per_subject}; de-duplication window {config.duplicate_window:g} s)."
    )


def _channel(ch: Channel, stream: StreamConfig) -> Doc:
    doc: Doc = {
        "address": ch.subject,
        "title": ch.subject,
        "summary": ch.summary,
        "description": f"{ch.summary} {_retention(stream)} Sent by: {', '.join(ch.senders)}. "
        f"Received by: {', '.join(r.service for r in ch.receivers)}.",
        "messages": {ch.model.__name__: {"$ref": f"#/components/messages/{ch.model.__name__}"}},
        "x-jetstream-stream": stream.name,
    }
    if ch.parameters:
        doc["parameters"] = {p: {"$ref": f"#/components/parameters/{p}"} for p in ch.parameters}
    return doc


def _operations(ch: Channel, stream: str):
    ref = {"$ref": f"#/channels/{ch.id}"}
    messages = [{"$ref": f"#/channels/{ch.id}/messages/{ch.model.__name__}"}]
    for service in ch.senders:
        yield (
            f"{service}-send-{ch.id}",
            {
                "action": "send",
                "channel": ref,
                "messages": messages,
                "title": f"{service} publishes {ch.model.__name__}",
                "summary": f"Published into stream {stream} with Nats-Msg-Id = {ch.msg_id.template}.",
                "tags": [{"name": service}],
            },
        )
    for receiver in ch.receivers:
        how = (
            f"durable pull consumer {', '.join(receiver.durables)} (explicit ack)"
            if receiver.durables
            else "an ephemeral consumer of new messages"
        )
        yield (
            f"{receiver.service}-receive-{ch.id}",
            {
                "action": "receive",
                "channel": ref,
                "messages": messages,
                "title": f"{receiver.service} consumes {ch.model.__name__}",
                "summary": f"Through {how} on stream {stream}.",
                "tags": [{"name": receiver.service}],
                "x-durables": list(receiver.durables),
            },
        )


def _headers(ch: Channel) -> Doc:
    return {
        "type": "object",
        "required": ["Nats-Msg-Id"],
        "properties": {
            "Nats-Msg-Id": {
                "type": "string",
                "pattern": ch.msg_id.pattern,
                "description": f"JetStream de-duplication id: {ch.msg_id.template}, {ch.msg_id.why}",
            },
            "content-type": {
                "type": "string",
                "const": "application/json",
                "description": "what MetaTune's producers send; the body is JSON either way",
            },
        },
    }


def _message(ch: Channel, example: Example) -> Doc:
    name = ch.model.__name__
    return {
        "name": name,
        "title": name,
        "summary": ch.summary,
        "description": (ch.model.__doc__ or ch.summary).strip(),
        "contentType": "application/json",
        "headers": _headers(ch),
        "payload": {"$ref": f"{SCHEMAS}{name}"},
        "correlationId": {"$ref": "#/components/correlationIds/study-or-job"},
        "examples": [
            {
                "name": example.name,
                "summary": example.summary,
                "headers": example.headers,
                "payload": example.event.model_dump(mode="json"),
            }
        ],
    }


def _schemas() -> Doc:
    models = [ch.model for ch in CATALOG] + requests.models()
    _, top = models_json_schema(
        [(model, "validation") for model in models], ref_template=SCHEMAS + "{model}"
    )
    return top["$defs"]

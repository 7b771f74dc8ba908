"""docs/asyncapi.json is the contract of record: complete, valid, true to the code, usable by others."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from metatune import contracts as c
from metatune import subjects
from metatune.bus.auth import principals
from metatune.bus.streams import stream_for
from metatune.registry import default_registry
from metatune.settings import Settings
from metatune_cli.asyncapi import CATALOG, document
from metatune_cli.asyncapi.examples import examples
from tests.support.samples import samples

REPO = Path(__file__).resolve().parents[2]
ROOT = "urn:metatune:asyncapi"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return document()


def validator(doc: dict[str, Any], pointer: str) -> Draft202012Validator:
    registry = Registry().with_resource(
        ROOT, Resource.from_contents(doc, default_specification=_draft())
    )
    return Draft202012Validator({"$ref": f"{ROOT}#{pointer}"}, registry=registry)


def _draft():
    from referencing.jsonschema import DRAFT202012

    return DRAFT202012


def walk(node: Any, path: str = ""):
    """(path, object) of every object of the document."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{path}/{i}")


def test_every_message_has_examples_that_validate_against_its_payload_and_headers(doc) -> None:
    for name, message in doc["components"]["messages"].items():
        assert message["examples"], name
        for example in message["examples"]:
            validator(doc, f"/components/schemas/{name}").validate(example["payload"])
            validator(doc, f"/components/messages/{name}/headers").validate(example["headers"])
            getattr(c, name).model_validate(example["payload"])  # and the contract agrees


def test_every_property_and_parameter_is_described(doc) -> None:
    undescribed = [
        f"{path}/{name}"
        for path, node in walk(doc)
        if isinstance(node.get("properties"), dict) and "/examples/" not in path
        for name, prop in node["properties"].items()
        if not prop.get("description")
    ]
    assert not undescribed, undescribed
    assert all(p.get("description") for p in doc["components"]["parameters"].values())


def test_required_fields_are_the_contracts_and_event_id(doc) -> None:
    for ch in CATALOG:
        schema = doc["components"]["schemas"][ch.model.__name__]
        wanted = {name for name, field in ch.model.model_fields.items() if field.is_required()} | {
            "event_id"
        }
        assert set(schema["required"]) == wanted, ch.model.__name__
        assert schema["additionalProperties"] is False


def test_headers_give_the_real_msg_id_scheme_and_correlation_comes_from_the_payload(doc) -> None:
    derived = {e.subject: e.headers["Nats-Msg-Id"] for e in examples() if e.msg_id}
    assert derived["metatune.clock.tick"].startswith("tick-2026-")
    assert re.fullmatch("completed-[0-9a-f]{32}", derived["metatune.runs.osl1.completed"])
    for ch in CATALOG:
        message = doc["components"]["messages"][ch.model.__name__]
        assert message["headers"]["required"] == ["Nats-Msg-Id"]
        assert (
            "correlation" not in json.dumps(message["headers"]).lower()
        )  # not a FastStream header
        correlation = doc["components"]["correlationIds"][
            message["correlationId"]["$ref"].rsplit("/", 1)[1]
        ]
        assert correlation["location"] == "$message.payload#/correlation_id"


def test_channels_name_their_stream_and_parameters(doc) -> None:
    settings = Settings.model_construct()
    streams = doc["x-jetstream-streams"]
    assert (
        streams["METATUNE"]["retention"] == "limits"
        and streams["METATUNE"]["max_age_s"] == 30 * 86400
    )
    assert streams["METATUNE_STATUS"]["max_msgs_per_subject"] == 500
    by_model = {type(e.event): e for e in examples()}
    for ch in CATALOG:
        channel = doc["channels"][ch.id]
        assert channel["x-jetstream-stream"] == stream_for(by_model[ch.model].subject, settings)
        assert set(channel.get("parameters", {})) == set(ch.parameters)
        for name in ch.parameters:  # the parameter's location in the payload exists
            spec = ch.model.model_fields.get("spec")  # a submission names its tenant in its spec
            assert name in ch.model.model_fields or (name == "tenant" and spec is not None)
    assert doc["components"]["parameters"]["datacenter"]["examples"][:2] == ["fra1", "osl1"]


def _matches(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


def test_operations_are_what_each_service_is_allowed_to_do(doc) -> None:
    """Every send is a publish the service's NATS user is granted; every durable a consumer it may create."""
    users = {p.name: p.permissions for p in principals(default_registry())}

    def grants(service: str):
        return [
            perms
            for name, perms in users.items()
            if name == service or name.startswith(f"{service}.")
        ]

    subject_of = {type(e.event): e.subject for e in examples()}
    for name, op in doc["operations"].items():
        ch = next((ch for ch in CATALOG if ch.id == op["channel"]["$ref"].rsplit("/", 1)[1]), None)
        if ch is None:  # a request/reply channel: tests/security/test_permissions.py checks it
            continue
        service = op["tags"][0]["name"]
        subject = subjects.errors(service) if "{service}" in ch.subject else subject_of[ch.model]
        if op["action"] == "send":
            allowed = [p for p in grants(service) if any(_matches(g, subject) for g in p.publish)]
            assert allowed, f"{name}: {service} may not publish {subject}"
        for durable in op.get("x-durables", []):
            stream = stream_for(subject, Settings.model_construct())
            create = f"$JS.API.CONSUMER.CREATE.{stream}.{durable.replace('{datacenter}', 'osl1')}."
            assert any(
                g.startswith(create) or _matches(g, create + "x")
                for p in grants(service)
                for g in p.publish
            ), name


def test_every_server_says_how_a_client_authenticates(doc) -> None:
    """Services, agents and the submitter sign with NKeys, the admin logs in with a password: an
    outside publisher reads from the document what its server asks of it."""
    schemes = doc["components"]["securitySchemes"]
    assert {name: s["type"] for name, s in schemes.items()} == {
        "nkey": "asymmetricEncryption",
        "userPassword": "userPassword",
    }
    for server in doc["servers"].values():
        refs = {item["$ref"].rsplit("/", 1)[-1] for item in server["security"]}
        assert refs == set(schemes)


def test_models_generated_from_the_document_parse_every_contract(
    doc, tmp_path: Path, monkeypatch
) -> None:
    from datamodel_code_generator import DataModelType, Formatter, InputFileType, generate

    openapi = {
        "openapi": "3.1.0",
        "info": {"title": "MetaTune", "version": "1"},
        "paths": {},
        "components": {"schemas": doc["components"]["schemas"]},
    }
    out = tmp_path / "generated.py"
    generate(
        json.dumps(openapi),
        input_file_type=InputFileType.OpenAPI,
        output=out,
        output_model_type=DataModelType.PydanticV2BaseModel,
        formatters=[Formatter.BUILTIN],
    )
    spec = importlib.util.spec_from_file_location("metatune_generated", out)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(
        sys.modules, spec.name, module
    )  # its annotations resolve through sys.modules
    spec.loader.exec_module(module)
    events = [event for _, event in samples()] + [e.event for e in examples()]
    assert {type(e) for e in events} == {ch.model for ch in CATALOG}
    for event in events:
        parsed = getattr(module, type(event).__name__).model_validate_json(event.to_bytes())
        assert parsed.model_dump(mode="json") == json.loads(event.to_bytes()), type(event).__name__


def test_asyncapi_cli_finds_no_error_and_no_warning(tmp_path: Path) -> None:
    binary = shutil.which("asyncapi")
    if binary is None:
        pytest.skip(
            "the asyncapi CLI is not installed (npm install -g @asyncapi/cli; scripts/install does it)"
        )
    analytics = tmp_path / "analytics.json"  # no telemetry from a test run
    analytics.write_text(
        json.dumps({"analyticsEnabled": "false", "infoMessageShown": "true", "userID": "tests"})
    )
    env = {**os.environ, "ASYNCAPI_METRICS_CONFIG_PATH": str(analytics)}
    result = subprocess.run(
        [
            binary,
            "validate",
            str(REPO / "docs" / "asyncapi.json"),
            "--fail-severity",
            "warn",
            "--diagnostics-format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 errors, 0 warnings" in result.stdout or '"severity": 0' not in result.stdout


@pytest.mark.slow  # runs the AsyncAPI generator (Node)
def test_the_docs_page_renders_from_the_document(tmp_path: Path) -> None:
    """The AsyncAPI HTML template turns the document into a page naming every channel (scripts/install
    puts the template under .venv/node)."""
    binary = shutil.which("asyncapi")
    template = REPO / ".venv" / "node" / "node_modules" / "@asyncapi" / "html-template"
    if binary is None or not template.is_dir():
        pytest.skip(
            "the asyncapi CLI or @asyncapi/html-template is not installed (scripts/install does both)"
        )
    analytics = tmp_path / "analytics.json"
    analytics.write_text(
        json.dumps({"analyticsEnabled": "false", "infoMessageShown": "true", "userID": "tests"})
    )
    env = {**os.environ, "ASYNCAPI_METRICS_CONFIG_PATH": str(analytics)}
    out = tmp_path / "site"
    result = subprocess.run(
        [
            binary,
            "generate",
            "fromTemplate",
            str(REPO / "docs" / "asyncapi.json"),
            str(template),
            "-o",
            str(out),
            "--force-write",
            "--no-interactive",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = (out / "index.html").read_text(encoding="utf-8")
    for channel in CATALOG:
        assert channel.subject.split(".{")[0] in page, channel.subject

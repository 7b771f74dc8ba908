"""Secrets never reach logs, events or command output: one redaction helper."""

from __future__ import annotations

import logging

import pytest

from metatune.redaction import RedactingFilter, redact, redact_url

SECRETS = [
    ("postgresql://admin:s3cr3t@db.example.org:5432/metatune", "s3cr3t"),
    ("https://user:hunter2@hooks.example.org/notify", "hunter2"),
    ("https://hooks.example.org/notify?token=abcdef123&study=1", "abcdef123"),
    ("host=db password=pa55word dbname=x", "pa55word"),
    ("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw in text", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    (
        "seed SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY here",
        "SUACSSL3UAHUDXKFSNVUZRF5UHPMWZ6BFDTJ7M6USDXIEDNPPQYYYCU3VY",
    ),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secrets_are_masked(text: str, secret: str) -> None:
    assert secret not in redact(text)
    assert "***" in redact(text)


def test_redact_url_keeps_what_is_not_secret() -> None:
    cleaned = redact_url("https://bob:pw@hooks.example.org:8443/a/b?api_key=zz&study=42")
    assert cleaned == "https://***@hooks.example.org:8443/a/b?api_key=***&study=42"
    assert (
        redact("nothing secret here, https://example.org/x?page=2")
        == "nothing secret here, https://example.org/x?page=2"
    )


def test_the_logging_filter_redacts_formatted_messages(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("metatune.test.redaction")
    caplog.handler.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="metatune.test.redaction"):
        logger.info("delivering to %s", "https://u:topsecret@hooks.example.org/x")
    assert "topsecret" not in caplog.text and "***@hooks.example.org" in caplog.text


def test_a_url_with_nothing_to_hide_is_shown_as_it_is() -> None:
    """MLflow users pass URIs such as sqlite:////abs/mlflow.db: rebuilding them loses slashes."""
    for url in (
        "sqlite:////srv/mlflow/mlflow.db",
        "sqlite:///rel.db",
        "http://h:5000/x?",
        "file:/x",
    ):
        assert redact_url(url) == url
    assert redact_url("sqlite:////srv/m.db?token=abc") == "sqlite:////srv/m.db?token=***"

"""The dashboard's read-only tokens against the real app and a real PostgreSQL: the tokens
`metatune secrets` writes, a bearer header or a one-time ``?token=`` that becomes a cookie, a
rotation's overlap, ``/healthz`` open, loopback-only openness when no token exists."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from metatune.clock import FixedClock
from metatune.dashboard_tokens import TOKEN_FILE, read_tokens, write_tokens
from metatune.errors import ConfigurationError
from metatune_telemetry.api.adapters.auth import COOKIE, same_site
from metatune_telemetry.api.adapters.http import create_app
from metatune_telemetry.app import create_service
from metatune_telemetry.settings import TelemetrySettings
from tests.support.cli import run

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
PROTECTED = (
    "/",
    "/api/studies",
    "/api/totals",
    "/metrics",
    "/openapi.json",
    "/static/plotly.min.js",
)


def current(directory: Path) -> str:
    return (directory / TOKEN_FILE).read_text().strip()


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    directory = tmp_path / "secrets"
    assert write_tokens(directory, T0)
    return directory


def client_for(db, directory: Path | None, clock: FixedClock, **settings) -> TestClient:
    s = TelemetrySettings(dashboard_tokens_dir=directory, **settings)
    return TestClient(create_app(db, s, now=clock.now))


async def test_no_token_or_a_wrong_one_is_401_the_right_one_200(db, tokens: Path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    token = current(tokens)
    with client_for(db, tokens, FixedClock(T0)) as client:
        assert client.get("/healthz").status_code == 200  # stays open
        for path in PROTECTED:
            refused = client.get(path)
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"].startswith("Bearer")
            wrong = client.get(path, headers={"Authorization": f"Bearer {token[:-1]}x"})
            assert wrong.status_code == 401, path
            assert (
                client.get(path, headers={"Authorization": "Basic Zm9vOmJhcg=="}).status_code == 401
            )
            right = client.get(path, headers={"Authorization": f"Bearer {token}"})
            assert right.status_code == 200, path
            assert token not in refused.text + wrong.text
        # a non-ASCII token is refused like any wrong one (compared as bytes)
        assert client.get("/api/studies", params={"token": "é" * 43}).status_code == 401
    assert token not in caplog.text


async def test_the_query_token_once_becomes_an_http_only_strict_cookie(db, tokens: Path) -> None:
    token = current(tokens)
    with client_for(db, tokens, FixedClock(T0)) as client:
        assert client.get("/", params={"token": "nope"}).status_code == 401
        assert COOKIE not in client.cookies
        answer = client.get(
            "/datacenters/fra1", params={"issues": "2", "token": token}, follow_redirects=False
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == "/datacenters/fra1?issues=2"  # the token left the URL
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert client.cookies[COOKIE] == token
        # from now on the cookie alone lets the browser in, the page's script included
        assert client.get("/").status_code == 200
        assert client.get("/static/plotly.min.js").status_code == 200
        client.cookies.clear()
        assert client.get("/", headers={"Cookie": f"{COOKIE}=forged"}).status_code == 401
        assert client.get("/").status_code == 401


async def test_the_token_redirect_stays_on_this_site(db, tokens: Path) -> None:
    """A link ``https://dashboard//evil.example/x?token=...`` must not send the browser (with its
    fresh cookie) to evil.example: ``//host`` and ``/\\host`` are other sites' addresses."""
    token = current(tokens)
    with client_for(db, tokens, FixedClock(T0)) as client:
        for path in ("//evil.example/x", "///evil.example/x"):
            answer = client.get(
                f"http://testserver{path}", params={"token": token}, follow_redirects=False
            )
            assert answer.status_code == 303, path
            assert answer.headers["location"] == "/evil.example/x", path
    assert same_site("/\\evil.example/x") == "/evil.example/x"  # sent raw by no HTTP client


async def test_every_answer_sends_the_security_headers(db, tokens: Path) -> None:
    token = current(tokens)
    with client_for(db, tokens, FixedClock(T0)) as client:
        answers = [client.get(path) for path in (*PROTECTED, "/healthz")]  # 401s, and /healthz
        answers.append(client.get("/", params={"token": token}, follow_redirects=False))
        answers += [client.get(path) for path in (*PROTECTED, "/studies/nope", "/no-such-page")]
        index = client.get("/")
    assert {a.status_code for a in answers} == {200, 303, 400, 401, 404}
    for answer in answers:
        csp = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, answer.url
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["referrer-policy"] == "no-referrer"
    # the page's one inline script (it draws the charts) is the one the policy allows by hash
    inline = re.findall(r"<script>(.*?)</script>", index.text, flags=re.S)
    digests = {base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() for s in inline}
    assert len(digests) == 1 and f"'sha256-{digests.pop()}'" in csp
    assert (
        "unsafe-eval" not in csp
        and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    )


async def test_the_previous_token_stays_valid_for_the_overlap_only(db, tokens: Path) -> None:
    old = current(tokens)
    clock = FixedClock(T0)
    with client_for(db, tokens, clock) as client:
        client.get("/", params={"token": old})  # a browser holding the old token's cookie
        assert write_tokens(tokens, clock.now(), rotate=True, overlap=timedelta(hours=2))
        new = current(tokens)
        assert new != old
        for token in (old, new):  # read at each request: no restart needed
            assert (
                client.get("/api/totals", headers={"Authorization": f"Bearer {token}"}).status_code
                == 200
            )
        assert client.get("/").status_code == 200  # the old cookie, within the overlap
        clock.advance(timedelta(hours=2))
        assert (
            client.get("/api/totals", headers={"Authorization": f"Bearer {old}"}).status_code == 401
        )
        assert client.get("/").status_code == 401
        assert (
            client.get("/api/totals", headers={"Authorization": f"Bearer {new}"}).status_code == 200
        )


async def test_off_loopback_tokens_are_mandatory_on_loopback_optional(db, tmp_path: Path) -> None:
    empty = tmp_path / "none"
    with pytest.raises(ConfigurationError, match=r"0\.0\.0\.0, not loopback.*metatune secrets"):
        create_app(db, TelemetrySettings(dashboard_tokens_dir=empty, telemetry_http_host="0.0.0.0"))
    with pytest.raises(ConfigurationError, match="not loopback"):  # the service refuses to start
        create_service(
            TelemetrySettings(
                dashboard_tokens_dir=empty, telemetry_http_host="0.0.0.0", telemetry_http_port=8090
            )
        )
    for host in ("127.0.0.1", "::1", "localhost"):  # open as before tokens existed
        with client_for(db, empty, FixedClock(T0), telemetry_http_host=host) as client:
            assert client.get("/api/studies").status_code == 200
    write_tokens(empty, T0)
    with client_for(db, empty, FixedClock(T0), telemetry_http_host="0.0.0.0") as client:
        assert client.get("/api/studies").status_code == 401
        auth = {"Authorization": f"Bearer {current(empty)}"}
        assert client.get("/api/studies", headers=auth).status_code == 200


def test_metatune_secrets_creates_and_rotates_the_dashboard_token(tmp_path: Path) -> None:
    directory = tmp_path / "nats"
    env = {k: v for k, v in os.environ.items() if not k.startswith("METATUNE_")} | {
        "METATUNE_DATA_DIR": str(tmp_path / "data"),
        "METATUNE_NATS_SECRETS_DIR": str(directory),
    }
    made = run(["secrets"], env)
    assert made.returncode == 0, made.stderr
    first = current(directory)
    assert (directory / TOKEN_FILE).stat().st_mode & 0o777 == 0o600
    assert run(["secrets"], env).returncode == 0 and current(directory) == first  # kept
    rotated = run(["secrets", "--rotate", "--token-overlap-hours", "3"], env)
    assert rotated.returncode == 0, rotated.stderr
    found = read_tokens(directory)
    assert found is not None and found.current.get_secret_value() != first
    assert found.previous.token is not None and found.previous.token.get_secret_value() == first
    assert found.previous.valid_until is not None
    now = found.previous.valid_until - timedelta(hours=3)
    assert first in found.valid(now) and first not in found.valid(found.previous.valid_until)
    for output in (made, rotated):
        assert first not in output.stdout + output.stderr
        assert found.current.get_secret_value() not in output.stdout + output.stderr


async def test_a_refusal_says_what_was_wrong_as_a_page_for_a_browser_json_for_an_api(
    db, tokens: Path
) -> None:
    token = current(tokens)
    browser = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    with client_for(db, tokens, FixedClock(T0)) as client:
        missing = client.get("/api/studies")
        wrong = client.get("/api/studies", headers={"Authorization": f"Bearer {token[:-1]}x"})
        assert missing.headers["content-type"] == "application/json"
        assert missing.json()["error"].startswith("a dashboard token is required")
        assert wrong.json()["error"].startswith("the dashboard token given is not valid")
        assert "required" not in wrong.json()["error"]
        for answer in (
            client.get("/", headers=browser),
            client.get("/", params={"token": "nope"}, headers=browser),
            client.get("/", headers={**browser, "Cookie": f"{COOKIE}=forged"}),
        ):
            assert answer.status_code == 401
            assert answer.headers["content-type"].startswith("text/html")
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert '<input name="token" type="password"' in answer.text
        page = client.get("/", headers=browser).text
        assert "a dashboard token is required" in page
        forged = client.get("/", headers={**browser, "Cookie": f"{COOKIE}=forged"}).text
        assert "is not valid" in forged and "required" not in forged.split("<form")[0]

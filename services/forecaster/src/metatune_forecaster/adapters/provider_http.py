"""What every grid-data provider adapter shares: one httpx client, one retry policy, one error map.

* 200: the JSON body.
* 401 / 403: :class:`SourceMisconfigured`, one line naming the setting to fix (never the
  credential: credentials travel in headers or basic auth; a provider that takes its key only as
  a query parameter, EIA, gets it added by the transport, below the client, so the URL httpx logs
  and every request an error names carry no key).
* 429 (honouring ``Retry-After``, seconds or an HTTP date), 5xx, timeouts and refused
  connections: retried with exponential backoff through :func:`metatune.bus.retry.retrying`
  for at most ``budget_s`` seconds, then :class:`ProviderUnavailable`.
* other statuses (a bad zone id, a missing endpoint): :class:`ProviderUnavailable` at once, or
  ``None`` where the caller says that status means "no data here" (a tier without forecasts).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import httpx
from pydantic import SecretStr

from metatune.backoff import retry_after_s
from metatune.bus.retry import retrying
from metatune.errors import BusUnavailable
from metatune.redaction import redact

from ..domain.hourly import utc
from ..domain.providers import ProviderTransient, ProviderUnavailable, SourceMisconfigured

Sleep = Callable[[float], Awaitable[None]]


class _QuerySecret(httpx.AsyncBaseTransport):
    """Adds ``name=secret`` to the query of each request on its way to ``inner``: the client's
    request (the one httpx logs, and a response's ``request``) never holds it."""

    def __init__(self, inner: httpx.AsyncBaseTransport, name: str, secret: SecretStr) -> None:
        self.inner, self.name, self.secret = inner, name, secret

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        keyed = httpx.Request(
            request.method,
            request.url.copy_merge_params({self.name: self.secret.get_secret_value()}),
            headers=request.headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        return await self.inner.handle_async_request(keyed)

    async def aclose(self) -> None:
        await self.inner.aclose()


class ProviderHttp:
    """GETs JSON from one provider; ``provider`` and ``setting`` only ever name things."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        setting: str,
        *,
        timeout_s: float = 10.0,
        budget_s: float = 60.0,
        initial_s: float = 1.0,
        max_delay_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        query_secret: tuple[str, SecretStr] | None = None,
    ) -> None:
        """``query_secret``: (parameter, key) a provider wants in every request's query."""
        self.provider = provider
        self.setting = setting
        self.budget_s = budget_s
        self.initial_s = initial_s
        self.max_delay_s = max_delay_s
        self.sleep = sleep
        self.clock = clock
        self._secrets = [query_secret[1]] if query_secret else []
        if query_secret is not None:
            transport = _QuerySecret(transport or httpx.AsyncHTTPTransport(), *query_secret)
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), timeout=httpx.Timeout(timeout_s), transport=transport
        )

    def __repr__(self) -> str:
        return f"ProviderHttp({self.provider!r}, {str(self._client.base_url)!r})"

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get_json(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        headers: Callable[[], Awaitable[Mapping[str, str]]] | None = None,
        auth: httpx.Auth | None = None,
        setting: str | None = None,
        absent: frozenset[int] = frozenset(),
    ) -> Any:
        """The JSON body of ``GET path``; ``headers`` is awaited before every attempt (a bearer
        token may be renewed between two). ``setting`` overrides the setting a 401/403 names;
        a status in ``absent`` returns None."""

        async def attempt() -> Any:
            try:
                response = await self._client.get(
                    path, params=params, headers=await headers() if headers else None, auth=auth
                )
            except httpx.HTTPError as exc:  # timeouts, refused connections, protocol errors
                raise ProviderTransient(type(exc).__name__) from exc
            status = response.status_code
            if status in (401, 403):
                raise SourceMisconfigured(
                    f"{self.provider} refused the request to {path} (HTTP {status}): "
                    f"check {setting or self.setting}"
                )
            if status in absent:
                return None
            if status == 429 or status >= 500:
                raise ProviderTransient(
                    f"HTTP {status}", retry_after_s(response.headers.get("retry-after"))
                )
            if status != 200:
                raise ProviderUnavailable(
                    f"{self.provider} answered HTTP {status} to {path}: "
                    + _scrub(" ".join(response.text[:200].split()), response.request, self._secrets)
                )
            try:
                return response.json()
            except ValueError as exc:
                raise ProviderUnavailable(f"{self.provider} sent invalid JSON for {path}") from exc

        try:
            return await retrying(
                attempt,
                what=f"{self.provider} GET {path}",
                budget_s=self.budget_s,
                initial_s=self.initial_s,
                max_delay_s=self.max_delay_s,
                sleep=self.sleep,
                transient=(ProviderTransient,),
                wait_hint=lambda exc: getattr(exc, "retry_after", None),
                clock=self.clock,
            )
        except BusUnavailable as exc:
            raise ProviderUnavailable(
                f"{self.provider} did not answer {path} for {self.budget_s:.0f} s ({exc.__cause__})"
            ) from exc.__cause__


def _scrub(text: str, request: httpx.Request, secrets: list[SecretStr] | None = None) -> str:
    """``text`` (a provider's error body) without the credentials ``request`` carried (or the
    transport added, ``secrets``), should the provider echo them, and without anything else
    :func:`redact` recognises."""
    for name in ("auth-token", "authorization"):
        value = request.headers.get(name, "")
        for secret in {value, value.partition(" ")[2]} - {""}:
            text = text.replace(secret, "***")
    for key in secrets or []:
        if key.get_secret_value():
            text = text.replace(key.get_secret_value(), "***")
    return redact(text)


def iso_z(moment: datetime) -> str:
    """``moment`` as ``YYYY-MM-DDTHH:MM:SSZ`` (UTC), the form every provider accepts."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")

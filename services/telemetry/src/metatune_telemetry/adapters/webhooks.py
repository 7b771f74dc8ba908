"""Webhook delivery over HTTP (httpx): a few attempts with backoff, then give up and say so."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx


class WebhookFailed(Exception):
    """The receiver did not accept the notification after every attempt."""


class WebhookSender:
    def __init__(self, attempts: int = 3, backoff_s: float = 0.5, timeout_s: float = 5.0) -> None:
        self.attempts = attempts
        self.backoff_s = backoff_s
        self._client = httpx.AsyncClient(timeout=timeout_s, headers={"user-agent": "metatune-telemetry"})

    async def send(self, url: str, body: dict[str, Any], event_id: str) -> None:
        last: str = ""
        for attempt in range(self.attempts):
            try:
                response = await self._client.post(url, json=body, headers={"idempotency-key": event_id})
                if response.status_code < 400:
                    return
                last = f"HTTP {response.status_code}"
                if 400 <= response.status_code < 500 and response.status_code != 429:
                    break  # the receiver rejects it; retrying will not help
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            await asyncio.sleep(self.backoff_s * 2**attempt)
        raise WebhookFailed(f"webhook {url} failed: {last}")

    async def close(self) -> None:
        await self._client.aclose()

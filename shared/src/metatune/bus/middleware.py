"""Consumer policy for every JetStream subscriber of a service.

* A payload that fails contract validation is acknowledged and turned into an
  ``invalid_message`` :class:`~metatune.contracts.ErrorEvent` on ``metatune.errors.<service>``.
* A handler that raises is negatively acknowledged with exponential backoff; at the last
  allowed delivery it is terminated and dead-lettered as a ``handler_failed`` error event.
* A message larger than ``max_message_bytes`` is acknowledged unread and reported as a
  ``message_too_large`` error event.
* Success is acknowledged explicitly.
The consumer keeps going in every case.

The middleware knows the service only through its settings and an :class:`ErrorReporter`, so the
bus does not import :mod:`metatune.service` (which imports the bus).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from faststream import BaseMiddleware
from faststream.exceptions import HandlerException
from faststream.message import StreamMessage
from faststream.nats.message import NatsMessage
from pydantic import ValidationError

from ..backoff import backoff_s
from ..contracts import ErrorKind, validation_summary
from ..settings import Settings

log = logging.getLogger("metatune.bus")

EXCERPT_CHARS = 2048


def _excerpt(body: bytes) -> str:
    return body[:EXCERPT_CHARS].decode("utf-8", errors="replace")


def _deliveries(msg: StreamMessage[Any]) -> int | None:
    raw = msg.raw_message
    try:
        return int(raw.metadata.num_delivered)
    except Exception:  # a core NATS message has no JetStream metadata
        return None


class ErrorReporter(Protocol):
    """Publishes a typed error event (``Service.report_error``)."""

    async def __call__(
        self,
        *,
        code: str,
        message: str,
        kind: ErrorKind,
        subject: str | None = None,
        payload_excerpt: str | None = None,
        deliveries: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> object: ...


def contract_middleware(settings: Settings, report_error: ErrorReporter) -> type[BaseMiddleware]:
    """Build the middleware class bound to a service's settings and error publisher."""

    class ContractMiddleware(BaseMiddleware):
        async def consume_scope(
            self, call_next: Callable[[Any], Awaitable[Any]], msg: StreamMessage[Any]
        ) -> Any:
            deliveries = _deliveries(msg)
            subject = getattr(msg.raw_message, "subject", None)
            size = len(msg.body or b"")
            if size > settings.max_message_bytes:  # refused before it is parsed: no handler sees it
                await report_error(
                    kind=ErrorKind.invalid_message,
                    code="message_too_large",
                    message=f"message of {size} bytes exceeds the limit of {settings.max_message_bytes} bytes",
                    subject=subject,
                    payload_excerpt=_excerpt(msg.body[:256]),
                    deliveries=deliveries,
                    details={"bytes": size, "limit": settings.max_message_bytes},
                )
                if deliveries is not None:
                    await msg.ack()
                return None
            try:
                result = await call_next(msg)
            except ValidationError as exc:
                await report_error(
                    kind=ErrorKind.invalid_message,
                    code="invalid_message",
                    message=validation_summary(exc),
                    subject=subject,
                    payload_excerpt=_excerpt(msg.body),
                    deliveries=deliveries,
                )
                await msg.ack()
                return None
            except HandlerException:
                raise
            except Exception as exc:
                if deliveries is None:
                    log.exception("handler for %s failed", subject)
                    return None
                if deliveries < settings.max_deliver:
                    delay = backoff_s(deliveries, settings.retry_backoff_s)
                    log.warning(
                        "handler for %s failed (delivery %d), retry in %.1fs: %r",
                        subject,
                        deliveries,
                        delay,
                        exc,
                    )
                    if isinstance(msg, NatsMessage):  # JetStream redelivers after the delay
                        await msg.nack(delay=delay)
                    else:
                        await msg.nack()
                    return None
                await report_error(
                    kind=ErrorKind.handler_failed,
                    code="dead_lettered",
                    message=f"{type(exc).__name__}: {exc}",
                    subject=subject,
                    payload_excerpt=_excerpt(msg.body),
                    deliveries=deliveries,
                )
                await msg.reject()
                return None
            if deliveries is not None:
                await msg.ack()
            return result

    return ContractMiddleware

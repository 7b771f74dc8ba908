"""Publishing with JetStream de-duplication: the event's id is its ``Nats-Msg-Id``."""

from __future__ import annotations

from faststream.nats import NatsBroker

from ..contracts import Event
from ..settings import Settings
from .streams import stream_for


def headers_for(event: Event, msg_id: str | None = None) -> dict[str, str]:
    return {"Nats-Msg-Id": msg_id or str(event.event_id), "content-type": "application/json"}


async def publish_event(
    broker: NatsBroker, subject: str, event: Event, settings: Settings, *, msg_id: str | None = None
) -> None:
    """Publish to JetStream and wait for the stream's ack (so nothing is lost silently).

    A second publish with the same ``event_id`` (or ``msg_id``) inside the de-duplication window
    is stored once.
    """
    await broker.publish(
        event.to_bytes(),
        subject,
        headers=headers_for(event, msg_id),
        stream=stream_for(subject, settings),
    )

"""Asking a service that has just started: its request subscription may not be at the server yet
(the server says no one listens), so the question is asked again until it is answered."""

from __future__ import annotations

from typing import TypeVar

from nats.aio.client import Client
from nats.errors import NoRespondersError
from pydantic import BaseModel

from tests.support.waiting import wait_for

Reply = TypeVar("Reply", bound=BaseModel)


async def answer(nc: Client, subject: str, request: BaseModel, reply: type[Reply]) -> Reply:
    async def ask() -> Reply | None:
        try:
            msg = await nc.request(subject, request.model_dump_json().encode(), timeout=30)
        except NoRespondersError:
            return None
        return reply.model_validate_json(msg.data)

    return await wait_for(ask, f"an answer on {subject}")

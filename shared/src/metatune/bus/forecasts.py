"""The last good (fresh) forecast of each region in the NATS KV bucket ``metatune_forecasts``:
the forecaster keeps it before each fresh forecast is published and reads it back before its
first round, so a forecaster restarted while a provider is down still has a stale forecast to
publish; a trainer-agent reads its region's on start, so the hours it trains before the next
round are priced too."""

from __future__ import annotations

from collections.abc import Iterable

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from ..contracts import CarbonForecast
from .streams import FORECASTS_BUCKET


async def recall(js: JetStreamContext, regions: Iterable[str]) -> dict[str, CarbonForecast]:
    """The kept forecast of each of ``regions`` that has one."""
    kv = await js.key_value(FORECASTS_BUCKET)
    kept: dict[str, CarbonForecast] = {}
    for region in regions:
        try:
            entry = await kv.get(region)
        except NotFoundError:  # never kept (or deleted)
            continue
        if entry.value:
            kept[region] = CarbonForecast.model_validate_json(entry.value)
    return kept


async def keep(js: JetStreamContext, forecast: CarbonForecast) -> None:
    kv = await js.key_value(FORECASTS_BUCKET)
    await kv.put(forecast.region, forecast.to_bytes())

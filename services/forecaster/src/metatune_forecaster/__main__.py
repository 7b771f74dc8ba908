"""``python -m metatune_forecaster``: run the forecaster service; ``--help`` says what it reads."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
Run the forecaster service: at every hour of the platform's clock, publish a 168-hour
carbon-intensity forecast on metatune.forecasts.<region> for each region of the datacenter
registry (stale, with an error event, while a provider is down). It runs until stopped."""

EPILOG = """\
configured by METATUNE_* environment variables (and a .env file), among them:
  METATUNE_NATS_URL                 NATS with JetStream (credentials: METATUNE_NATS_NKEY_FILE)
  METATUNE_REGISTRY_PATH            your datacenters and each region's intensity_source
                                    (default: the embedded registry)
  METATUNE_DATABASE_URL             PostgreSQL of the observed intensity (live sources)
  METATUNE_FORECASTER_WEATHER       replay (default) or open-meteo
  METATUNE_ELECTRICITYMAPS_TOKEN_FILE, METATUNE_WATTTIME_USERNAME, ...: provider keys
history ahead of time: metatune forecaster backfill --region R --from YYYY-MM-DD
every setting: the README's configuration table; going live: the forecaster's README"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m metatune_forecaster",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.parse_args(argv)  # --help prints the above and exits; any argument is a usage error
    from .app import create_service  # the model, pandas and the bus only when it runs

    create_service().run()


if __name__ == "__main__":
    main()

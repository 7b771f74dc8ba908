"""``metatune-trainer-agent --datacenter NAME`` (or ``python -m metatune_trainer_agent`` with METATUNE_DATACENTER)."""

from __future__ import annotations

import argparse

from metatune.settings import get_settings


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="metatune-trainer-agent", description="MetaTune trainer agent of one datacenter"
    )
    parser.add_argument(
        "--datacenter",
        default=get_settings().datacenter or None,
        help="datacenter name from the registry (default: METATUNE_DATACENTER)",
    )
    args = parser.parse_args(argv)
    if not args.datacenter:
        parser.error("--datacenter (or METATUNE_DATACENTER) is required")
    from .app import create_service

    create_service(args.datacenter).run()


if __name__ == "__main__":
    main()

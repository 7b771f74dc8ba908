"""One rank of a run across several devices, as torchrun starts it.

``python -m torch.distributed.run --standalone --nproc-per-node N -m
metatune_trainer_agent.adapters.worker SOCKET DEVICE_TYPE``: the agent starts this (see
:mod:`.multi_device`); it is not meant to be run by hand.
"""

from __future__ import annotations

import logging
import sys

from .multi_device import run_worker


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: metatune_trainer_agent.adapters.worker SOCKET DEVICE_TYPE")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s rank %(process)d %(message)s")
    run_worker(args[0], args[1])


if __name__ == "__main__":
    main()

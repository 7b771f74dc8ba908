"""Build the replay extract the service ships with: ``python -m metatune_forecaster.tools.extract --data DIR``.

One year (2023, 52 weeks) of Electricity Maps carbon intensity and Open-Meteo observed weather
for every region of the datacenter registry, as one small Parquet file. See data/PROVENANCE.md.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from metatune.registry import default_registry

from ..adapters.carbon_folder import load_em
from ..adapters.package_data import REPLAY_PATH
from ..adapters.replay import REPLAY_DAYS, REPLAY_START
from .arguments import data_folder_parser


def build_extract(folder: Path, regions: list[str]) -> pd.DataFrame:
    end = REPLAY_START + pd.Timedelta(days=REPLAY_DAYS)
    parts = []
    for region in regions:
        frame = load_em(folder, region).slice(REPLAY_START, end).frame
        if len(frame) != REPLAY_DAYS * 24:
            raise ValueError(
                f"{region}: {len(frame)} hours in the replay year, expected {REPLAY_DAYS * 24}"
            )
        part = pd.DataFrame(
            {
                "region": region,
                "datetime_utc": frame.index,
                "ci_g_per_kwh": frame["ci"].round(2).astype("float32"),
                "temperature_c": frame["temperature_c"].round(1).astype("float32"),
                "wind_ms": frame["wind_ms"].round(2).astype("float32"),
                "cloud_pct": frame["cloud_pct"].round(0).astype("float32"),
            }
        )
        parts.append(part)
    extract = pd.concat(parts, ignore_index=True)
    extract["region"] = extract["region"].astype("category")
    return extract


def main(argv: list[str] | None = None) -> None:
    parser = data_folder_parser(__doc__, "folder laid out like carbon/ (em_hourly, em_weather)")
    parser.add_argument("--out", type=Path, default=REPLAY_PATH)
    args = parser.parse_args(argv)
    extract = build_extract(args.data, default_registry().regions())
    extract.to_parquet(args.out, compression="zstd", index=False)
    print(
        f"{len(extract)} rows, {extract['region'].nunique()} regions, {args.out.stat().st_size / 1024:.0f} kB at {args.out}"
    )


if __name__ == "__main__":
    main()

"""Each stored hour records the emission factors of its intensity (``direct`` or ``lifecycle``).

A deployment reads only the hours of its own factors (``METATUNE_EMISSION_FACTORS``): a store
filled before the setting changed keeps its rows, but they never enter the other kind's history.
Rows stored before this column existed were direct (every source asked for direct factors).
"""

from yoyo import step

__depends__ = {"forecaster_0001_observations"}

APPLY = [
    "ALTER TABLE intensity_observations "
    "ADD COLUMN IF NOT EXISTS factors text NOT NULL DEFAULT 'direct'",
    "ALTER TABLE intensity_observations ADD CONSTRAINT intensity_observations_factors "
    "CHECK (factors IN ('direct', 'lifecycle'))",
]
ROLLBACK = [
    "ALTER TABLE intensity_observations DROP CONSTRAINT IF EXISTS intensity_observations_factors",
    "ALTER TABLE intensity_observations DROP COLUMN IF EXISTS factors",
]

steps = [step(APPLY[0], ROLLBACK[1]), step(APPLY[1], ROLLBACK[0])]

ALTER TABLE forecast_points DROP COLUMN IF EXISTS short_history;

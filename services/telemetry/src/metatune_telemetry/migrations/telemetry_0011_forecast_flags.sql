-- The flags of the forecasts each stored forecast hour came from, so the disclosure can list the
-- job-hours priced from a stale or short-history forecast. A forecast hour is stored once per
-- (region, issue, hour), and a stale forecast (the last good one shifted, its issued_at kept)
-- repeats the hours of its issue: a flag marks a stored hour when any forecast that carried it
-- had it (the writer ORs them). Rows stored before get their flags from the logged forecasts.
-- depends: telemetry_0010_prediction_intervals

ALTER TABLE forecast_points ADD COLUMN IF NOT EXISTS short_history boolean NOT NULL DEFAULT false;

WITH logged AS (
    SELECT e.payload->>'region' AS region,
           (e.payload->>'issued_at')::timestamptz AS issued_at,
           (e.payload->>'start')::timestamptz AS start,
           coalesce(e.payload->>'stale', 'false') = 'true' AS stale,
           coalesce(e.payload->>'short_history', 'false') = 'true' AS short_history
      FROM event_log e
     WHERE e.subject LIKE 'metatune.forecasts.%'
       AND (e.payload->>'stale' = 'true' OR e.payload->>'short_history' = 'true')
), flagged AS (
    SELECT p.region, p.issued_at, p.hour,
           bool_or(l.stale) AS stale, bool_or(l.short_history) AS short_history
      FROM forecast_points p
      JOIN logged l ON l.region = p.region AND l.issued_at = p.issued_at
       AND p.hour >= l.start AND p.hour < l.start + interval '168 hours'
     GROUP BY p.region, p.issued_at, p.hour
)
UPDATE forecast_points p
   SET stale = p.stale OR f.stale, short_history = p.short_history OR f.short_history
  FROM flagged f
 WHERE f.region = p.region AND f.issued_at = p.issued_at AND f.hour = p.hour
   AND ((f.stale AND NOT p.stale) OR (f.short_history AND NOT p.short_history));

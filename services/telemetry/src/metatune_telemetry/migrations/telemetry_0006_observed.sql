-- The observed (realised) intensity of each region-hour, from the observed hours forecasts carry
-- (CarbonForecast.observed). A later report of an hour (a provider revising it) replaces an
-- earlier one. Job-hours are re-priced with it where their hour is observed: realised emissions
-- beside the forecast-priced ones the agents charged (adapters/queries.py). Average and marginal
-- observations are kept apart; the location-based disclosure reads the average ones only.
-- depends: telemetry_0005_metric_points

CREATE TABLE IF NOT EXISTS observed_intensity (
    region      text        NOT NULL,
    hour        timestamptz NOT NULL,
    signal      text        NOT NULL,
    g_per_kwh   double precision NOT NULL,
    source      text        NOT NULL,
    issued_at   timestamptz NOT NULL,
    PRIMARY KEY (region, hour, signal)
);

INSERT INTO observed_intensity (region, hour, signal, g_per_kwh, source, issued_at)
SELECT DISTINCT ON (e.payload->>'region', (h->>'hour')::timestamptz, coalesce(e.payload->'observed'->>'signal', 'average'))
       e.payload->>'region', (h->>'hour')::timestamptz, coalesce(e.payload->'observed'->>'signal', 'average'),
       (h->>'g_per_kwh')::double precision, e.payload->'observed'->>'source', (e.payload->>'issued_at')::timestamptz
  FROM event_log e, json_array_elements(e.payload->'observed'->'hours') h
 WHERE e.subject LIKE 'metatune.forecasts.%' AND json_typeof(e.payload->'observed') = 'object'
 ORDER BY 1, 2, 3, (e.payload->>'issued_at')::timestamptz DESC
ON CONFLICT DO NOTHING;

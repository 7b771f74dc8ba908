-- The emission factors (direct or lifecycle, METATUNE_EMISSION_FACTORS) of each observed hour,
-- as the forecast that reported it names them: its observed hours come from the forecaster's
-- history of that deployment's factors (forecaster_0002), so they share the forecast's. Rows
-- stored before get them from their logged forecast where it names them, else direct (every
-- source asked for direct factors before the setting existed).
-- depends: telemetry_0011_forecast_flags

ALTER TABLE observed_intensity
    ADD COLUMN IF NOT EXISTS emission_factors text NOT NULL DEFAULT 'direct';
ALTER TABLE observed_intensity DROP CONSTRAINT IF EXISTS observed_intensity_emission_factors;
ALTER TABLE observed_intensity ADD CONSTRAINT observed_intensity_emission_factors
    CHECK (emission_factors IN ('direct', 'lifecycle'));

UPDATE observed_intensity o
   SET emission_factors = 'lifecycle'
  FROM event_log e
 WHERE e.subject LIKE 'metatune.forecasts.%'
   AND e.payload->>'region' = o.region
   AND (e.payload->>'issued_at')::timestamptz = o.issued_at
   AND e.payload->>'emission_factors' = 'lifecycle'
   AND o.emission_factors <> 'lifecycle';

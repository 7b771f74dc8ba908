-- What each finished run trained on, as its agent measured it (RunCompleted.hardware: device,
-- GPU model and count, CPU model, precision): the disclosure states it instead of the registry's
-- GPU. Rows stored before this migration get it from their logged event.
-- depends: telemetry_0006_observed

ALTER TABLE run_results ADD COLUMN IF NOT EXISTS hardware jsonb;

UPDATE run_results r
   SET hardware = (e.payload->'hardware')::jsonb
  FROM event_log e
 WHERE e.subject LIKE 'metatune.runs.%completed' AND (e.payload->>'job_id')::uuid = r.job_id
   AND r.hardware IS NULL AND json_typeof(e.payload->'hardware') = 'object';

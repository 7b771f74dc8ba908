-- What each finished run trained on, as its agent measured it (RunCompleted.hardware: device,
-- GPU model and count, CPU model, precision): the disclosure states it instead of the registry's
-- GPU. Why an early-stopped run stopped (RunCompleted.stop_reason), which every view shows. The
-- accuracy of always predicting the most common training label on the validation split
-- (RunCompleted.majority_baseline), shown beside every accuracy. Rows stored before this
-- migration get them from their logged event.
-- depends: telemetry_0006_observed

ALTER TABLE run_results
    ADD COLUMN IF NOT EXISTS hardware jsonb,
    ADD COLUMN IF NOT EXISTS stop_reason text,
    ADD COLUMN IF NOT EXISTS majority_baseline double precision;

UPDATE run_results r
   SET hardware = CASE WHEN json_typeof(e.payload->'hardware') = 'object'
                       THEN (e.payload->'hardware')::jsonb END,
       stop_reason = e.payload->>'stop_reason',
       majority_baseline = (e.payload->>'majority_baseline')::double precision
  FROM event_log e
 WHERE e.subject LIKE 'metatune.runs.%completed' AND (e.payload->>'job_id')::uuid = r.job_id
   AND r.status = 'completed';

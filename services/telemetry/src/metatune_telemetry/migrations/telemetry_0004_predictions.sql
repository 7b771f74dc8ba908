-- The recommender's prediction of each trial's objective (the study page plots it against the
-- objective the run reached). Rows stored before this migration get it from their logged event.
-- depends: telemetry_0003_ingest

ALTER TABLE job_requests
    ADD COLUMN IF NOT EXISTS metric_name text,
    ADD COLUMN IF NOT EXISTS predicted_metric double precision,
    ADD COLUMN IF NOT EXISTS predicted_metric_std double precision;

UPDATE job_requests q
   SET metric_name = e.payload->>'metric_name',
       predicted_metric = (e.payload->>'predicted_metric')::double precision,
       predicted_metric_std = (e.payload->>'predicted_metric_std')::double precision
  FROM event_log e
 WHERE e.subject = 'metatune.jobs.requested' AND (e.payload->>'job_id')::uuid = q.job_id
   AND q.predicted_metric IS NULL;

-- The 80 % interval the recommender published with each trial's prediction (the demo's closing
-- table and the study views say whether the result fell inside). Rows stored before this
-- migration get it from their logged event.
-- depends: telemetry_0009_profiles

ALTER TABLE job_requests
    ADD COLUMN IF NOT EXISTS predicted_metric_low double precision,
    ADD COLUMN IF NOT EXISTS predicted_metric_high double precision;

UPDATE job_requests q
   SET predicted_metric_low = (e.payload->'predicted_metric_interval'->>0)::double precision,
       predicted_metric_high = (e.payload->'predicted_metric_interval'->>1)::double precision
  FROM event_log e
 WHERE e.subject = 'metatune.jobs.requested' AND (e.payload->>'job_id')::uuid = q.job_id
   AND json_typeof(e.payload->'predicted_metric_interval') = 'array'
   AND q.predicted_metric_low IS NULL;

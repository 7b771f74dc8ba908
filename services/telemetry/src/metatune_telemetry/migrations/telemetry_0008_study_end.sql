-- What telemetry needs to tell when a study ends (domain/completion.py): the recommender stopped
-- requesting trials (StudyStopped), jobs withdrawn before they ran (JobCancelled), and per run the
-- emissions and the adapter its completion reported. A secret per webhook endpoint (its URL
-- without credentials), rotated with an overlap: every secret not yet retired signs, a NULL secret
-- standing for the default one (domain/signing.py). Rows stored before this migration get their
-- facts from their logged events.
-- depends: telemetry_0007_run_facts

CREATE TABLE IF NOT EXISTS study_stops (
    study_id         uuid PRIMARY KEY,
    stopped_at       timestamptz NOT NULL,
    trials_requested integer NOT NULL,
    metric_name      text
);

CREATE TABLE IF NOT EXISTS job_cancellations (
    job_id       uuid PRIMARY KEY,
    study_id     uuid,
    cancelled_at timestamptz NOT NULL
);

ALTER TABLE run_results
    ADD COLUMN IF NOT EXISTS emissions_g double precision,
    ADD COLUMN IF NOT EXISTS adapter_key text;

CREATE TABLE IF NOT EXISTS webhook_secrets (
    id         bigserial PRIMARY KEY,
    endpoint   text NOT NULL,
    secret     text,
    created_at timestamptz NOT NULL DEFAULT now(),
    retires_at timestamptz
);
CREATE INDEX IF NOT EXISTS webhook_secrets_endpoint ON webhook_secrets (endpoint);

INSERT INTO study_stops (study_id, stopped_at, trials_requested, metric_name)
SELECT DISTINCT ON ((payload->>'study_id')::uuid) (payload->>'study_id')::uuid, occurred_at,
       (payload->>'trials_requested')::integer, payload->>'metric_name'
  FROM event_log WHERE subject = 'metatune.studies.stopped'
 ORDER BY (payload->>'study_id')::uuid, occurred_at
ON CONFLICT DO NOTHING;

INSERT INTO job_cancellations (job_id, study_id, cancelled_at)
SELECT DISTINCT ON ((payload->>'job_id')::uuid) (payload->>'job_id')::uuid,
       (payload->>'study_id')::uuid, occurred_at
  FROM event_log WHERE subject = 'metatune.jobs.cancelled'
 ORDER BY (payload->>'job_id')::uuid, occurred_at
ON CONFLICT DO NOTHING;

UPDATE run_results r
   SET emissions_g = (e.payload->'accounting'->>'emissions_g')::double precision,
       adapter_key = CASE WHEN r.status = 'completed' THEN e.payload->>'adapter_key' END
  FROM event_log e
 WHERE e.subject LIKE 'metatune.runs.%.' || r.status AND (e.payload->>'job_id')::uuid = r.job_id;

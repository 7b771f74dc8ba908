-- Every MetaTune event, as published. A hypertable on TimescaleDB; a plain table otherwise.
CREATE TABLE IF NOT EXISTS events (
    occurred_at    timestamptz NOT NULL,
    subject        text        NOT NULL,
    event_id       uuid        NOT NULL,
    correlation_id text,
    payload        jsonb       NOT NULL,
    PRIMARY KEY (event_id, occurred_at)
);
CREATE INDEX IF NOT EXISTS events_subject_time ON events (subject, occurred_at DESC);
CREATE INDEX IF NOT EXISTS events_correlation ON events (correlation_id, occurred_at);

-- Who to notify: each study's webhook, and which study each job belongs to.
CREATE TABLE IF NOT EXISTS studies (
    study_id    uuid PRIMARY KEY,
    webhook_url text,
    submitted_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id   uuid PRIMARY KEY,
    study_id uuid NOT NULL
);

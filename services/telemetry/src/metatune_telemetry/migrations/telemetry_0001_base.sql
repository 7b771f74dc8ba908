-- Tables that are not time series: who to notify, what was requested, how runs ended, what was
-- rejected, and the webhook outbox. The time-series tables (event log, metrics, forecasts, agent
-- status, energy per job-hour) come in telemetry_0002, as hypertables or partitioned tables.

CREATE TABLE IF NOT EXISTS telemetry_mode (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    mode       text NOT NULL CHECK (mode IN ('timescaledb', 'postgresql')),
    decided_at timestamptz NOT NULL DEFAULT now()
);

-- Messages that are not valid events of their subject: the exact bytes and why.
CREATE TABLE IF NOT EXISTS event_rejects (
    id          bigserial PRIMARY KEY,
    stream      text NOT NULL,
    stream_seq  bigint NOT NULL,
    subject     text NOT NULL,
    code        text NOT NULL,
    reason      text NOT NULL,
    raw         bytea NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stream, stream_seq)
);

CREATE TABLE IF NOT EXISTS studies (
    study_id        uuid PRIMARY KEY,
    submitted_at    timestamptz NOT NULL,
    webhook_url     text,
    base_model      text NOT NULL,
    task            text NOT NULL,
    home_datacenter text,
    spec            jsonb NOT NULL
);

CREATE TABLE IF NOT EXISTS job_requests (
    job_id              uuid PRIMARY KEY,
    study_id            uuid NOT NULL,
    trial_index         integer NOT NULL,
    requested_at        timestamptz NOT NULL,
    base_model          text NOT NULL,
    home_datacenter     text,
    config              jsonb NOT NULL,
    predicted_loss      double precision,
    predicted_loss_std  double precision,
    gpus                integer NOT NULL,
    estimated_gpu_hours double precision NOT NULL,
    power_kw            double precision NOT NULL,
    deadline            timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS job_requests_study ON job_requests (study_id);

-- How each run ended (a completion replaces an earlier failure of the same job, never the reverse).
CREATE TABLE IF NOT EXISTS run_results (
    job_id              uuid PRIMARY KEY,
    study_id            uuid,
    status              text NOT NULL CHECK (status IN ('completed', 'failed')),
    finished_at         timestamptz NOT NULL,
    datacenter          text NOT NULL,
    config              jsonb,
    metrics             jsonb,
    failure_reason      text,
    steps               integer,
    early_stopped       boolean,
    tokens_seen         bigint NOT NULL,
    tokens_with_padding bigint NOT NULL,
    energy_wh           double precision NOT NULL,
    gpu_hours           double precision NOT NULL,
    wall_seconds        double precision NOT NULL,
    power_source        text
);
CREATE INDEX IF NOT EXISTS run_results_study ON run_results (study_id);

CREATE TABLE IF NOT EXISTS plans (
    event_id             uuid PRIMARY KEY,
    occurred_at          timestamptz NOT NULL,
    plan_version         integer NOT NULL,
    horizon_start        timestamptz NOT NULL,
    expected_emissions_g double precision NOT NULL,
    baseline_emissions_g double precision NOT NULL,
    solve_seconds        double precision NOT NULL,
    mip_gap              double precision,
    infeasible_jobs      uuid[] NOT NULL
);
CREATE INDEX IF NOT EXISTS plans_time ON plans (occurred_at);

CREATE TABLE IF NOT EXISTS plan_entries (
    event_id     uuid NOT NULL REFERENCES plans (event_id),
    job_id       uuid NOT NULL,
    datacenter   text NOT NULL,
    hours        timestamptz[] NOT NULL,
    emissions_g  double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS plan_entries_event ON plan_entries (event_id);
CREATE INDEX IF NOT EXISTS plan_entries_job ON plan_entries (job_id);

CREATE TABLE IF NOT EXISTS assignments (
    event_id      uuid PRIMARY KEY,
    occurred_at   timestamptz NOT NULL,
    job_id        uuid NOT NULL,
    study_id      uuid NOT NULL,
    datacenter    text NOT NULL,
    action        text NOT NULL,
    plan_version  integer NOT NULL,
    gpus          integer NOT NULL,
    hours_planned double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS assignments_job ON assignments (job_id, occurred_at);

-- The last state each study or job was notified in: a state is notified once, however often the
-- event that carries it is re-published (the scheduler re-sends jobs.infeasible every hour).
CREATE TABLE IF NOT EXISTS notify_state (
    entity_id  text PRIMARY KEY,
    state      text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);

-- The transactional outbox: written in the transaction that stores the event, read by the
-- delivery worker. state: pending -> sending -> delivered | dead (back to pending on retry).
CREATE TABLE IF NOT EXISTS webhook_outbox (
    id               bigserial PRIMARY KEY,
    message_id       text NOT NULL UNIQUE,
    study_id         uuid,
    event_id         uuid NOT NULL,
    event_type       text NOT NULL,
    url              text NOT NULL,
    body             text NOT NULL,
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'delivered', 'dead')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_until      timestamptz,
    last_status      integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz
);
CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox (next_attempt_at) WHERE state IN ('pending', 'sending');

CREATE TABLE IF NOT EXISTS webhook_keys (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    secret     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

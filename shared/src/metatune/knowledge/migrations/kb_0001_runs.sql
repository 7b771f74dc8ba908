-- Knowledge base of fine-tuning runs (metatune.knowledge.store): one row per run, the profiles of
-- the platform's studies, and the files imported. Plain tables on PostgreSQL and TimescaleDB alike
-- (runs are looked up by dataset, model and task, not by time, so no hypertable).

CREATE TABLE kb_runs (
    run_id              text PRIMARY KEY,
    study_id            uuid,
    dataset_name        text NOT NULL,
    base_model          text NOT NULL,
    task                text NOT NULL,
    status              text NOT NULL,
    stop_reason         text,
    source              text NOT NULL,
    metric_name         text NOT NULL,
    metric              double precision,
    val_loss            double precision,
    majority_baseline   double precision,
    steps               integer NOT NULL DEFAULT 0,
    planned_steps       integer,
    tokens              bigint NOT NULL DEFAULT 0,
    tokens_with_padding bigint NOT NULL DEFAULT 0,
    wall_seconds        double precision NOT NULL DEFAULT 0,
    train_seconds       double precision,
    gpu_hours           double precision NOT NULL DEFAULT 0,
    energy_wh           double precision NOT NULL DEFAULT 0,
    emissions_g         double precision,
    device              text,
    gpu_model           text,
    gpu_count           integer,
    datacenter          text,
    seed                integer,
    code_version        text,
    profile_missing     boolean NOT NULL DEFAULT false,
    config              jsonb NOT NULL,
    curve               jsonb NOT NULL DEFAULT '[]'::jsonb,
    features            jsonb,
    dataset             jsonb NOT NULL,
    hardware            jsonb,
    provenance          jsonb NOT NULL,
    stored_at           timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX kb_runs_model_task ON kb_runs (base_model, task);
CREATE INDEX kb_runs_dataset ON kb_runs (dataset_name);
CREATE INDEX kb_runs_source ON kb_runs (source);
CREATE INDEX kb_runs_study ON kb_runs (study_id) WHERE study_id IS NOT NULL;
CREATE INDEX kb_runs_profile_missing ON kb_runs (study_id) WHERE profile_missing;

CREATE TABLE kb_study_profiles (
    study_id     uuid PRIMARY KEY,
    dataset_name text NOT NULL,
    base_model   text NOT NULL,
    task         text NOT NULL,
    spec         jsonb NOT NULL,
    features     jsonb NOT NULL,
    profiled_at  timestamptz,
    stored_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kb_imports (
    sha256      text PRIMARY KEY,
    name        text NOT NULL,
    runs        integer NOT NULL,
    added       integer NOT NULL,
    header      jsonb NOT NULL,
    imported_at timestamptz NOT NULL DEFAULT now()
);

-- The classes each study's dataset holds, as the profiler counted them
-- (DatasetProfiled.features.n_classes; 0 for a causal LM): every accuracy is shown beside chance,
-- 1 / that count, as well as beside its majority-class baseline. A study profiled again keeps the
-- latest profile. Studies profiled before this migration get it from their logged event.
-- depends: telemetry_0008_study_end

CREATE TABLE IF NOT EXISTS study_profiles (
    study_id    uuid PRIMARY KEY,
    profiled_at timestamptz NOT NULL,
    n_classes   integer NOT NULL
);

INSERT INTO study_profiles (study_id, profiled_at, n_classes)
SELECT DISTINCT ON ((payload->>'study_id')::uuid) (payload->>'study_id')::uuid, occurred_at,
       coalesce((payload->'features'->>'n_classes')::integer, 0)
  FROM event_log WHERE subject = 'metatune.datasets.profiled'
 ORDER BY (payload->>'study_id')::uuid, occurred_at DESC
ON CONFLICT DO NOTHING;

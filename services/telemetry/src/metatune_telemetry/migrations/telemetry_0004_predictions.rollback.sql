ALTER TABLE job_requests DROP COLUMN IF EXISTS metric_name, DROP COLUMN IF EXISTS predicted_metric,
    DROP COLUMN IF EXISTS predicted_metric_std;

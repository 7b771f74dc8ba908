ALTER TABLE job_requests
    DROP COLUMN IF EXISTS predicted_metric_low,
    DROP COLUMN IF EXISTS predicted_metric_high;

DROP TABLE IF EXISTS webhook_secrets;
ALTER TABLE run_results DROP COLUMN IF EXISTS emissions_g, DROP COLUMN IF EXISTS adapter_key;
DROP TABLE IF EXISTS job_cancellations;
DROP TABLE IF EXISTS study_stops;

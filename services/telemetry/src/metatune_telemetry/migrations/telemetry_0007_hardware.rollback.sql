ALTER TABLE run_results DROP COLUMN IF EXISTS hardware;

ALTER TABLE run_results DROP COLUMN IF EXISTS hardware, DROP COLUMN IF EXISTS stop_reason,
    DROP COLUMN IF EXISTS majority_baseline;

DROP TABLE IF EXISTS webhook_keys, webhook_outbox, notify_state, assignments, plan_entries, plans, run_results,
    job_requests, studies, event_rejects, telemetry_mode;

"""MetaTune telemetry: the event log in TimescaleDB (plain PostgreSQL where the extension is absent)."""

"""Embedded defaults: start NATS and PostgreSQL ourselves when none answers at the configured URL."""

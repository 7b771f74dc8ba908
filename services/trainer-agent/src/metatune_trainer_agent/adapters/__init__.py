"""Glue between the agent and NATS: datasets in, checkpoints and adapters out."""

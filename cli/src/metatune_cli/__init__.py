"""MetaTune's tools: the ``metatune`` command line, the Python client and study files, the demo,
the embedded NATS and PostgreSQL, and the AsyncAPI generator. No service installs it; services
contribute CLI commands through the ``metatune.cli`` entry-point group."""

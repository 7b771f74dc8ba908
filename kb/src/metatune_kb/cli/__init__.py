"""The ``metatune kb`` commands, each a ``metatune.cli.kb`` entry point."""

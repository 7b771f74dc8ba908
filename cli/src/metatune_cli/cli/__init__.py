"""The ``metatune`` command line."""

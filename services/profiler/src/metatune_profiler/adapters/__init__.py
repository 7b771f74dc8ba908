"""Glue to the outside: fetching a submitted dataset from the object store, a path or a URL."""

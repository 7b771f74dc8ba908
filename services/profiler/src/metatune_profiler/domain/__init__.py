"""Pure profiling logic: readers, features and ``profile_file``; no bus, no network."""

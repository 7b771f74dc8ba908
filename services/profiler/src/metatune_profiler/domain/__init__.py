"""Pure profiling logic: rows, counts and features (``profile_rows``); no file, bus or network."""

"""Pure training logic: no bus, no object store; the agent and the CLI both call :func:`run_training`."""

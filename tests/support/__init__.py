"""What the test folders share: a pytest plugin (fixtures, options, marker rules) and plain
helpers (waiting on a state, local servers, sample events, request builders).

Test folders import from here and from nowhere else in ``tests`` (``test_layout.py`` checks), so
a folder can move or go without breaking another.
"""

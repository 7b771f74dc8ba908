"""Offline tools that build the files the forecaster ships with (``data/``): the model and its
weather-error calibration (:mod:`.train`), the replay extract (:mod:`.extract`)."""

"""Offline tools of the trainer: the seed knowledge-base build and the learning-curve stopper's
fit (:mod:`.knowledge`, behind ``metatune kb build|merge|fit-stopper``)."""

"""Typed exceptions shared by every service, and the map of every MetaTune exception.

One tree, one name per failure: every exception class in ``metatune`` and the services derives
from :class:`MetaTuneError`, so ``except MetaTuneError`` catches everything the platform raises on
purpose. Where callers already catch a builtin, the class derives from it too (``also``). A
service subclasses a shared class only to add what it publishes (an error ``code``, a failure
``reason``). ``tests/foundation/test_exception_tree.py`` checks this drawing against the code.

Exception hierarchy::

    MetaTuneError: base of every MetaTune error
      ConfigurationError: settings or a committed config file are wrong (at start-up)
        ModelArtifactError: forecaster: a model file missing, unreadable or for other features
      BusUnavailable: NATS did not answer at the configured URL
      DatabaseUnavailable: PostgreSQL did not answer at the configured URL
      ObjectNotFound: a dataset, checkpoint or adapter key is not in the object store
      DatasetNotFound: a dataset's object key, path or URL resolves to no file
        ProfileDatasetNotFound (also ProfileError): profiler: with its error ``code``
        TrainingDatasetNotFound (also TrainingError): trainer: with its failure ``reason``
      DatasetDigestMismatch: a dataset's content is not the one its submission's sha256 names
        ProfileDigestMismatch (also ProfileError): profiler: with its error ``code``
        TrainingDigestMismatch (also TrainingError): trainer: with its failure ``reason``
      InputNotAllowed: a user-supplied location points where the platform must not go
        ProfileInputNotAllowed (also ProfileError): profiler: with its error ``code``
        TrainingInputNotAllowed (also TrainingError): trainer: with its failure ``reason``
      DownloadFailed: a URL could not be fetched within the limits
      EmbeddedServerError: an embedded NATS or PostgreSQL could not be started
      StudyFileError (also ValueError): a study file that cannot be read or does not validate
      UnknownSubject: a subject that no channel of the catalog carries
      InvalidSubjectToken (also ValueError): a name that cannot be a NATS subject token
      SealedWebhookUnreadable (also ValueError): a sealed webhook URL this key cannot open
      UnknownBaseModel: a base model that is not embedded, a local model directory or a hub id
        ProfileUnknownBaseModel (also ProfileError): profiler: with its error ``code``
        TrainingUnknownBaseModel (also TrainingError): trainer: with its failure ``reason``
      DemoStepFailed: one step of ``metatune demo`` did not happen
      DemoAlreadyRunning (also RuntimeError): a demo platform started earlier still runs
      InvalidRequest (also ValueError): client: an argument the platform would refuse
      NotFound (also LookupError): client: no such study, job or adapter in the event log
      StillRunning (also TimeoutError): client: a wait ran past its limit; the study goes on
      KnowledgeBaseError: base of the knowledge base's errors
        KbFileError: not a knowledge-base file, or a line that is not a run
          KbSchemaMismatch: a knowledge-base file of another schema version
        BuildError (also RuntimeError): kb: the knowledge-base build cannot go on
        SliceError (also ValueError): kb: a dataset file the build cannot slice
        CurveModelError (also ValueError): trainer: a curve-stop model file that cannot be used
      ProfileError: profiler: a dataset (or request) unusable as submitted; carries ``code``
        NotUtf8: a row that is not UTF-8
        EmptyDataset: a file without rows
        NoTextColumn: no text column found or the named one is absent
        NoLabelColumn: no label column found or the named one is absent
        NoPairColumn: a pair task without a second text column
        OneClassLabel: a classification dataset with a single label
        RowTooLarge: a row over the size limit
        FileTooLarge: a file over the size limit, or one that decompresses past it
        MalformedRows: rows that do not parse
        MissingValues: rows whose text or label cell is empty or null
        UnreadableDataset: not in the declared or detected format at all
      TrainingError: trainer: a run stopped for a reason the submitter can act on; ``reason``
        InvalidTrainingConfig: a LoRA or training configuration that cannot run
        EmptySplit: no usable rows for the split a run needs
        SmokeTestFailed: the smoke test (a step on the longest batch) failed
        OutOfMemory: even a micro-batch of one example does not fit on the device
        CheckpointMismatch: a checkpoint written by another job configuration
      RecommenderError: recommender: base of its domain errors
        EmptyHistory: no task in the knowledge base has enough runs for a prior
        SurrogateFailure: the Gaussian process could not be fitted or conditioned
      LoopStateConflict: recommender: the study's loop record changed since it was read
      ProviderUnavailable: forecaster: a weather or intensity source did not answer
        ProviderTransient: a failure worth another try (429, 5xx, a network error)
        SourceMisconfigured: the provider refused our credentials or is set up wrongly
      InsufficientHistory: forecaster: not enough observed intensity to scale a forecast
      MlflowExportError: telemetry: the MLflow export cannot run or MLflow refused it
      ArtifactLocationNeeded (also ValueError): telemetry: no folder for an MLflow store's artifacts
"""

from __future__ import annotations


class MetaTuneError(Exception):
    """Base of every MetaTune error."""


class ConfigurationError(MetaTuneError):
    """Settings or a committed config file are wrong; raised at start-up, never later."""


class BusUnavailable(MetaTuneError):
    """NATS did not answer at the configured URL."""

    def __init__(self, url: str, reason: str = "") -> None:
        self.url = url
        super().__init__(f"NATS is not reachable at {url}" + (f": {reason}" if reason else ""))


class DatabaseUnavailable(MetaTuneError):
    """PostgreSQL did not answer at the configured URL."""

    def __init__(self, url: str, reason: str = "") -> None:
        self.url = url
        reason = " ".join(reason.split())  # psycopg's reasons run over lines: one line
        super().__init__(
            f"PostgreSQL is not reachable at {url}" + (f": {reason}" if reason else "")
        )


class ObjectNotFound(MetaTuneError):
    """A dataset, checkpoint or adapter key is not in the object store."""


class DatasetNotFound(MetaTuneError):
    """A dataset's object key, path or URL resolves to no file (or to one that cannot be read)."""


class DatasetDigestMismatch(MetaTuneError):
    """A dataset's content is not the one its submission's ``sha256`` names (the object was
    replaced after it was submitted, or the file changed): it is not used
    (:func:`metatune.integrity.verify_sha256`)."""


class InputNotAllowed(MetaTuneError):
    """A user-supplied location points where the platform must not go (outside the data roots, a
    non-public address, a scheme other than http(s), a redirect to any of those)."""


class DownloadFailed(MetaTuneError):
    """A URL could not be fetched within the limits (status, size, time, redirects)."""

"""MetaTune trainer agent: one process per GPU datacenter that trains LoRA adapters for real."""

__version__ = "0.1.0"

"""MetaTune shared package: the contracts and plumbing every service uses."""

__version__ = "0.1.0"

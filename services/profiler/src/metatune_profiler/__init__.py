"""MetaTune profiler: turns a submitted dataset into the meta-features the recommender learns from."""

from .domain.profile import ProfileOptions, ProfileResult, profile_file

__all__ = ["ProfileOptions", "ProfileResult", "profile_file"]

"""Tools of the recommender that run beside the service (python -m metatune_recommender.tools.NAME)."""

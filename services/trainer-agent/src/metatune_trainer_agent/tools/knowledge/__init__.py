"""``metatune kb build``: the seed knowledge base, trained with the agent's own ``run_training``."""

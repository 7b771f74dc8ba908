"""MetaTune's knowledge base room: the seed build, the public tables, the cold-start portfolio and
the ``metatune kb`` commands. The records, files, search space, statistics and the store stay in
the core (``metatune.knowledge``), where the services read them."""

"""MetaTune scheduler: where and when every training job runs, for the least carbon."""

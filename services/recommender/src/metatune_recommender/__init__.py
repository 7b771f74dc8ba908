"""MetaTune recommender: which LoRA configurations to train for a profiled dataset."""

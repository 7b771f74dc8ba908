"""Pure knowledge-base rules: the space-filling design of a build and the greedy portfolio."""

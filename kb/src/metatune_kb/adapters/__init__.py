"""The knowledge base's I/O: data slices, the build (profiling and training), public tables."""

"""The version of bpe-dask: one place, read by the package, the workers' check and the build."""

__version__ = "0.1.0"

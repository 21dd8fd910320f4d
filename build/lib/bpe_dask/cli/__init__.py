"""The command line ``bpe-dask``: each command a job of the Python API."""

from bpe_dask.cli.main import main

__all__ = ["main"]

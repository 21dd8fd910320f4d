"""The jobs users run: options, the cluster, preflight checks, and count, train and encode, each
planning its inputs, running its stages as Dask tasks and publishing its outputs."""

"""The pipeline's stages, each a function of its inputs run as Dask tasks or in one process:
count (map), reduce, merge (the BPE merge loop) and encode."""

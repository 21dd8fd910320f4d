"""The compiled core (numba): the scanners that count pre-tokens, the encoder, the merge loop, and the
sum of sorted count tables; each computes what a rule in ``bpe_dask.rules`` states, at machine speed."""

"""The synthetic benchmark corpora's parts (``benchmarks/make_corpus.py`` is their command line)."""

EOT = "<|endoftext|>"  # the document separator of every corpus

"""The rules of byte-level BPE as CS336 states them: split patterns, pre-tokenization, where text may be
cut, special tokens, and the reference trainer every engine is held to. Pure: no I/O."""

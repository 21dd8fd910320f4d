"""Input and output through fsspec: URLs and storage, planning partitions, reading text and records,
the count table and tokenizer file formats, and publishing every output as one transaction."""

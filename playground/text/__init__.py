"""Text in and out: the tokenizers (characters, BPE through ``tokenizers``), the corpora and seeded batches.

Knows nothing about models: a tokenizer maps text <-> token IDs, a dataset cuts IDs into windows.
"""

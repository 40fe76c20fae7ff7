"""The model families (the GPT today), the dropout variants, the family factory and sampling with a KV cache.

Knows nothing about files or the Hub (checkpoints/ loads and saves), nor about the UI.
"""

"""The course notebooks' own classes, one module per notebook, under each notebook's names, constructor
signatures, attribute names (so a notebook reader's ``state_dict`` loads strictly) and forward signatures. The
notebooks themselves (``../shared/seeds``) are the specification; tests/test_notebooks.py runs their code beside
these modules.

    notebook_000  CharTokenizer, TokenIdsDataset, AttentionHead(config), MultiHeadAttention(config)
    notebook_001  CausalAttention, MultiHeadAttentionWrapper, MultiHeadAttention, count_parameters
    notebook_002  scaled_dot_product, MultiHeadAttention(d_model, num_heads), LayerNormalization,
                  PositionwiseFeedForward, EncoderLayer, Encoder; heads joined right unless forget_transpose=True
    notebook_003  MultiHeadAttention(d_model, num_heads, dropout), FeedForward, TransformerLayer,
                  TwoLayerTransformer(vocab_size, d_model, num_heads, d_ff, max_seq_len, dropout)
    notebook_004  Head(C_head), MultiHeadAttention(C, num_heads) with sliced heads, SimpleLanguageModel,
                  get_batch, generate
    pitfalls      forgotten_transpose(heads_output): notebook 002's missing transpose, feature by feature

The class names repeat across notebooks (four MultiHeadAttentions), so import the module:

    from playground.textbook import notebook_002
    notebook_002.Encoder(16, 32, 4, 0.1, 2)(torch.randn(1, 5, 16)).shape -> (1, 5, 16)

Knows nothing about files or the UI.
"""

import importlib

# Loaded on first use, so importing one notebook's module (the checkpoint loader imports notebook_004's model) does
# not import the other four and what they need (notebook_000's tokenizer reads corpora).
_FROM = {"combine_heads": "notebook_002", "FeatureSource": "pitfalls", "ForgottenTranspose": "pitfalls",
         "RowMix": "pitfalls", "forgotten_transpose": "pitfalls", "TextbookError": "sizes"}
_NOTEBOOKS = ("000", "001", "002", "003", "004")

__all__ = ["NOTEBOOKS", *_FROM, *(f"notebook_{number}" for number in _NOTEBOOKS)]


def __getattr__(name: str):
    if name == "NOTEBOOKS":
        return {number: importlib.import_module(f"{__name__}.notebook_{number}") for number in _NOTEBOOKS}
    if name in _FROM:
        return getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    if name.startswith("notebook_") and name[len("notebook_"):] in _NOTEBOOKS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

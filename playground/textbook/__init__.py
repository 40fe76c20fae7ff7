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

from playground.textbook import notebook_000, notebook_001, notebook_002, notebook_003, notebook_004
from playground.textbook.notebook_002 import combine_heads
from playground.textbook.pitfalls import FeatureSource, ForgottenTranspose, RowMix, forgotten_transpose
from playground.textbook.sizes import TextbookError

NOTEBOOKS = {"000": notebook_000, "001": notebook_001, "002": notebook_002, "003": notebook_003,
             "004": notebook_004}

__all__ = [
    "NOTEBOOKS",
    "FeatureSource",
    "ForgottenTranspose",
    "RowMix",
    "TextbookError",
    "combine_heads",
    "forgotten_transpose",
    "notebook_000",
    "notebook_001",
    "notebook_002",
    "notebook_003",
    "notebook_004",
]

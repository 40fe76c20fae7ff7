"""The course notebooks' own classes, with their names, constructor signatures and parameter names, so a
notebook's ``state_dict`` loads strictly and its outputs agree. Where each class comes from:

    notebook 002  encoder.py    LayerNormalization(d_model, eps=1e-5), PositionwiseFeedForward(d_model, d_ff,
                                dropout=0.1), MultiHeadSelfAttention(d_model, num_heads, forget_transpose=False)
                                (the notebook's MultiHeadAttention, unmasked), EncoderLayer(d_model, num_heads, d_ff,
                                dropout=0.1, forget_transpose=False), Encoder(num_layers, d_model, num_heads, d_ff,
                                dropout=0.1, forget_transpose=False); post-norm, the heads joined right unless
                                forget_transpose=True asks for the notebook's own (buggy) join
    notebook 003  two_layer.py  MultiHeadAttention(d_model, num_heads) called (query, key, value, mask),
                                FeedForward(d_model, d_ff), TransformerLayer(d_model, num_heads, d_ff, dropout=0.1),
                                TwoLayerTransformer(vocab_size, d_model, num_heads, d_ff, max_len, dropout=0.1);
                                causal, xavier init
    notebook 004  toy_lm.py     SimpleLanguageModel(vocab_size, block_size, n_embd, n_head): attention only,
                                forward(idx, targets) -> (logits, loss), generate(idx, max_new_tokens, generator)
    pitfalls.py                 forgotten_transpose(heads_output): notebook 002's missing transpose, feature by feature

Knows nothing about tokenizers, files or the UI; imports nothing from the rest of the playground.

    from playground.textbook import Encoder
    Encoder(2, 16, 4, 32)(torch.randn(1, 5, 16)).shape -> (1, 5, 16)
"""

from playground.textbook.encoder import (
    Encoder,
    EncoderLayer,
    LayerNormalization,
    MultiHeadSelfAttention,
    PositionwiseFeedForward,
    combine_heads,
)
from playground.textbook.pitfalls import FeatureSource, ForgottenTranspose, RowMix, forgotten_transpose
from playground.textbook.sizes import TextbookError
from playground.textbook.toy_lm import Head, Heads, SimpleLanguageModel
from playground.textbook.two_layer import (
    FeedForward,
    MultiHeadAttention,
    TransformerLayer,
    TwoLayerTransformer,
    causal_mask,
)

__all__ = [
    "Encoder",
    "EncoderLayer",
    "FeatureSource",
    "FeedForward",
    "ForgottenTranspose",
    "Head",
    "Heads",
    "LayerNormalization",
    "MultiHeadAttention",
    "MultiHeadSelfAttention",
    "PositionwiseFeedForward",
    "RowMix",
    "SimpleLanguageModel",
    "TextbookError",
    "TransformerLayer",
    "TwoLayerTransformer",
    "causal_mask",
    "combine_heads",
    "forgotten_transpose",
]

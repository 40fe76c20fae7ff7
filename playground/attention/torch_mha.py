"""Multi-head attention as PyTorch ships it: ``torch.nn.MultiheadAttention`` with a causal boolean mask.

One packed ``in_proj_weight`` (3·d_out, d_out) holds W_query, W_key, W_value stacked [all q | all k | all v];
the output projection is the module's own ``out_proj``. ``nn.MultiheadAttention`` projects its input from
``embed_dim`` to ``embed_dim``, so this form needs d_in == d_out (it raises a ValueError otherwise) rather
than hiding an extra projection that the other forms do not have.
One adjustment: PyTorch's single ``bias`` flag switches the q/k/v biases *and* the out_proj bias together,
while every other form here always has an out_proj bias. With ``qkv_bias=False`` we give ``out_proj`` a bias
(initialised to zero, as PyTorch itself initialises it), so the layer can express the batched reference.
In training mode nn.MultiheadAttention calls ``scaled_dot_product_attention``, so ``backend`` asks which
kernel that picks. Maths only.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.base import AttentionImplementation, check_heads, copy_parameter, sdpa_backend_for


class TorchMHAAttention(AttentionImplementation):
    """Causal ``nn.MultiheadAttention`` self-attention: (B, T, d_out) -> (B, T, d_out); needs d_in == d_out."""

    name = "torch_mha"
    title = "PyTorch's built-in nn.MultiheadAttention"
    why = "PyTorch's packed in_proj and its own attention path"
    parameter_formula = "3·d_out·d_out (+3·d_out bias) + d_out·d_out + d_out"  # the reference's, with d_in = d_out

    @classmethod
    def unsupported_reason(cls, d_in, d_out, num_heads):
        reason = super().unsupported_reason(d_in, d_out, num_heads)
        if reason is None and d_in != d_out:
            reason = (f"torch_mha needs d_in == d_out (got d_in={d_in}, d_out={d_out}): nn.MultiheadAttention "
                      "maps embed_dim to embed_dim")
        return reason

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out divisible by num_heads, d_in == d_out
        self.context_length = context_length
        self.attention = nn.MultiheadAttention(d_out, num_heads, dropout=dropout, bias=qkv_bias, batch_first=True)
        if not qkv_bias:  # bias=False also dropped out_proj's bias; the other forms keep it
            self.attention.out_proj.bias = nn.Parameter(torch.zeros(d_out))
        future = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", future)  # True where a query may NOT look

    def _mask(self, x):
        num_tokens = x.shape[1]
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        return self.mask[:num_tokens, :num_tokens]  # (T, T)

    def forward(self, x):
        out, _ = self.attention(x, x, x, attn_mask=self._mask(x), need_weights=False, is_causal=True)
        return out  # (B, T, d_out)

    def attention_weights(self, x):
        """Each head's attention weights, as MHA returns them: (B, T, d_out) -> (B, h, T, T)."""
        _, weights = self.attention(x, x, x, attn_mask=self._mask(x), need_weights=True, average_attn_weights=False)
        return weights

    def load_reference(self, reference):
        """Stack the reference's W_query, W_key, W_value into ``in_proj_weight`` [all q | all k | all v]."""
        mha = self.attention
        check_heads(reference, mha.num_heads)
        roles = (reference.W_query, reference.W_key, reference.W_value)
        copy_parameter(mha.in_proj_weight, torch.cat([r.weight for r in roles]), "in_proj_weight")  # (3·d_out, d_out)
        bias = torch.cat([r.bias for r in roles]) if reference.W_query.bias is not None else None
        copy_parameter(mha.in_proj_bias, bias, "in_proj_bias")
        copy_parameter(mha.out_proj.weight, reference.out_proj.weight, "out_proj.weight")
        copy_parameter(mha.out_proj.bias, reference.out_proj.bias, "out_proj.bias")

    def backend(self, x):
        """Which kernel the scaled_dot_product_attention call inside nn.MultiheadAttention picks for this input."""
        return sdpa_backend_for(x, self.attention.num_heads, self.attention.head_dim)

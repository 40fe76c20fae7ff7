"""What every model family answers the same way: its size, and GPT-2's (and Llama's) initialisation.

GPT, the Llama family and notebook 004's model mix ``CountsItsWeights`` in, so the budget, the cards and the
views ask any of them ``parameter_count()`` and ``weights_bytes()`` alike.
"""

from __future__ import annotations

from torch import nn


class CountsItsWeights:
    """``parameter_count`` and ``weights_bytes`` for an nn.Module (mixed in before nn.Module)."""

    def parameter_count(self) -> int:
        """Every parameter once (``parameters()`` yields a tied matrix once)."""
        return sum(p.numel() for p in self.parameters())

    def weights_bytes(self) -> int:
        """Bytes the parameters and buffers take in memory, a tied matrix once."""
        return sum(t.numel() * t.element_size() for t in (*self.parameters(), *self.buffers()))


def init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation, which transformers' LlamaPreTrainedModel keeps: every matrix N(0, 0.02), biases 0
    (norms keep their own ones and zeros). For ``model.apply``."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)



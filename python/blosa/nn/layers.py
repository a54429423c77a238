"""Small building blocks shared by every encoder: activations, dropout places, dense layers, masks.

Initialization follows the paper (section 4.1): Glorot-uniform weights, zero biases.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from blosa.nn.dropout import Dropout
from blosa._validate import check_dense

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "elu": F.elu,
    "selu": F.selu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "leaky_relu": F.leaky_relu,
    "identity": lambda x: x,
}

# Where dropout may be applied (`dropout_at=`):
#   "input":  on the encoder's input embeddings [B, n, d_e]
#   "dense":  on the input of every learned layer (dense, convolution, recurrent input
#             transform); this is where the authors' TensorFlow code puts it
#   "output": on the encoder's token representations and sentence vector
DROPOUT_PLACES = ("input", "dense", "output")


def get_activation(activation: str | Callable) -> Callable[[torch.Tensor], torch.Tensor]:
    """An activation function by name (see ACTIVATIONS) or the callable itself."""
    if callable(activation):
        return activation
    try:
        return ACTIVATIONS[activation]
    except KeyError:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)} or a callable; got {activation!r}") from None


def dropout_places(dropout_at: str | Iterable[str]) -> frozenset[str]:
    """Validate `dropout_at` (one place or several of DROPOUT_PLACES) and return it as a set."""
    places = frozenset([dropout_at] if isinstance(dropout_at, str) else dropout_at)
    bad = places - set(DROPOUT_PLACES)
    if bad:
        raise ValueError(f"dropout_at places must be among {DROPOUT_PLACES}; got {sorted(bad)}")
    return places


def glorot_(module: nn.Module) -> nn.Module:
    """Glorot-uniform every weight with >= 2 dims and zero every bias of `module`, in place."""
    for name, p in module.named_parameters():
        if p.dim() >= 2:
            nn.init.xavier_uniform_(p)
        elif "bias" in name.rsplit(".", 1)[-1]:
            nn.init.zeros_(p)
    return module


class Dense(nn.Module):
    """y = act(W dropout(x) + b): a fully connected layer with Glorot weights and zero bias.

    Args:
        d_in, d_out: feature sizes. bias: whether b exists. activation: name or callable,
        None for linear. dropout: probability on the layer's input.
    Shapes: x [..., d_in] -> y [..., d_out].
    """

    def __init__(self, d_in: int, d_out: int, bias: bool = True, activation=None, dropout: float = 0.0):
        super().__init__()
        self.linear = glorot_(nn.Linear(d_in, d_out, bias=bias))
        self.act = None if activation is None else get_activation(activation)
        self.dropout = Dropout(dropout) if dropout > 0 else nn.Identity()

    def extra_repr(self) -> str:
        """The activation by its ACTIVATIONS name, or the callable's own."""
        if self.act is None:
            return ""
        name = next((k for k, f in ACTIVATIONS.items() if f is self.act), None)
        return f"activation={name or getattr(self.act, '__name__', repr(self.act))!r}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(self.dropout(x))
        return y if self.act is None else self.act(y)


def zero_padding(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """x [B, n, d] with padded positions (mask [B, n] False) set to exactly 0.

    masked_fill rather than multiplication, so non-finite values at padding cannot leak as NaN.
    """
    return x.masked_fill(~mask[..., None], 0.0)


def check_width(name: str, value, meaning: str = "") -> None:
    """Raise ValueError unless `value`, a layer size, is an int >= 1; `meaning` says how it was
    derived, for sizes computed from others (MultiCNN's filters from hidden, say)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1{f' ({meaning})' if meaning else ''}, got {value!r}")


def checked_mask(x: torch.Tensor, mask: torch.Tensor | None, d_in: int, name: str = "x") -> torch.Tensor:
    """The mask of a layer's or an encoder's input, checked against it: [B, n] bool on x's device,
    True for real tokens; None means every token is real. Raises ValueError/TypeError naming the
    bad input (`name` is what the caller calls x) instead of a matmul's or a broadcast's error,
    or worse, a [B, 1] mask broadcast over every token. x: [B, n, d_in]."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    check_dense(name, x)
    if x.dim() != 3 or x.shape[-1] != d_in:
        raise ValueError(f"{name} must be [B, n, {d_in}], got {tuple(x.shape)}")
    if mask is None:
        return torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor or None, got {type(mask).__name__}")
    check_dense("mask", mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = real token), got {mask.dtype}")
    if mask.shape != x.shape[:2]:
        raise ValueError(f"mask must be [B, n] = {list(x.shape[:2])}, got {tuple(mask.shape)}")
    if mask.device != x.device:
        raise ValueError(f"mask is on {mask.device}, {name} on {x.device}; use one device")
    return mask

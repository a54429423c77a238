"""mBloSA: masked block self-attention (paper section 3.1)."""
from __future__ import annotations

import warnings

import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import statically_known_true

from blosa.nn.block_len import resolve_block_len
from blosa._validate import check_direction
from blosa.nn.layers import Dense, check_width, checked_mask, zero_padding
from blosa.nn.masked_attention import MaskedAttention
from blosa.nn.source2token import Source2Token


def _one_graph_for_every_length(n) -> bool:
    """Whether the call is traced for a graph that serves every length n: torch.export (strict,
    as torch.onnx tries it, or not) or another symbolic trace with n symbolic. Not torch.compile,
    which guards on what depends on n and compiles again where it changes. Under dynamo (strict
    export) a symbolic n looks like an int to isinstance, so it is told by what is known of it
    without a guard: a concrete n's parity is known, a symbolic one's is not."""
    if torch.jit.is_tracing() or (torch.compiler.is_compiling() and not torch.compiler.is_exporting()):
        return False  # a jit trace keeps the traced length's r, and forward warns so
    return not (statically_known_true(n % 2 == 0) or statically_known_true(n % 2 == 1))


class MaskedBlockSelfAttention(nn.Module):
    """mBloSA, following the paper's equations (section 3.1).

    With r the block length and m = ceil(n / r) blocks (the last one padded):
        h   = g^m(x^l, M) for every block l, parameters shared     intra-block, "local"
        v_l = source2token(h^l)                                    one vector per block
        o   = g^m(v, M)                                            inter-block
        G   = sigmoid(W_g1 o + W_g2 v + b_g);  e = G * o + (1 - G) * v
        E   = e_l repeated for the tokens of block l               "global"
        F   = act(W_f1 [x; h; E] + b_f1);  G' = sigmoid(W_f2 [x; h; E] + b_f2)
        u   = G' * F + (1 - G') * x,  0 at padding

    Padding: a block's padded tokens get no weight in its source2token, and blocks with no
    real token are masked out of the inter-block attention, so a sentence's output does not
    depend on how much the batch is padded (for a fixed int block_len; "auto" derives r from
    the padded length, which is batch-dependent by definition).

    Ablations (Table 3): use_local=False drops the intra-block attention (v is computed from x
    and h leaves the fusion); use_global=False drops v, o, e and E.

    Shapes: x [B, n, d], mask [B, n] bool (None: every token real) -> u [B, n, d].
    """

    def __init__(self, d: int, direction: str, block_len: int | str = "auto", activation="relu",
                 dropout: float = 0.0, scale: float = 5.0, backend: str = "auto",
                 use_local: bool = True, use_global: bool = True):
        super().__init__()
        check_width("d", d)
        check_direction(direction)
        resolve_block_len(block_len, 1)  # validate now, not at the first batch
        self.block_len = block_len
        self.d = d
        self.use_local, self.use_global = use_local, use_global
        if use_local:
            self.intra = MaskedAttention(d, direction, scale=scale, dropout=dropout, backend=backend)
        if use_global:
            self.block_s2t = Source2Token(d, activation=activation, dropout=dropout)
            self.inter = MaskedAttention(d, direction, scale=scale, dropout=dropout, backend=backend)
            self.gate_o = Dense(d, d, bias=False, dropout=dropout)
            self.gate_v = Dense(d, d, bias=True, dropout=dropout)
        d_fuse = d * (1 + use_local + use_global)
        self.fuse_f = Dense(d_fuse, d, activation=activation, dropout=dropout)
        self.fuse_g = Dense(d_fuse, d, dropout=dropout)

    def extra_repr(self) -> str:
        ablated = [f"{name}=False" for name in ("use_local", "use_global") if not getattr(self, name)]
        return ", ".join([f"d={self.d}", f"block_len={self.block_len!r}", *ablated])

    @staticmethod
    def block_mask(mask_blocks: torch.Tensor) -> torch.Tensor:
        """[B*m, r] token mask -> [B*m] block mask: a block with no real token is no key or query
        of the inter-block attention (the authors' code forgot this; see MODEL_NOTES)."""
        return mask_blocks.any(dim=1)

    def global_context(self, h: torch.Tensor, mask: torch.Tensor, r: int) -> torch.Tensor:
        """E [B, n, d] from h [B, n, d]: block vectors v, inter-block attention, gate, duplicate."""
        B, n, d = h.shape
        m = -(-n // r)
        # So that with a symbolic n (torch.compile(dynamic=True), torch.export) one graph holds
        # for every length, blocks are gathered by index (padding and reshaping guarded on r
        # not dividing n), and a traced graph has one more block, all padding (merging B and m
        # guards on m > 1): it has no real token, so the inter-block attention masks it out.
        if torch.compiler.is_compiling() and n > 0:
            m += 1
        pos = torch.arange(m, device=h.device)[:, None] * r + torch.arange(r, device=h.device)  # [m, r]
        past_end = pos >= n  # padding
        index = pos.clamp(max=n - 1)
        h_blocks = h[:, index].masked_fill(past_end[:, :, None], 0.0).flatten(0, 1)  # [B*m, r, d]
        mask_blocks = (mask[:, index] & ~past_end).flatten(0, 1)
        v = self.block_s2t(h_blocks, mask_blocks).unflatten(0, (B, m))  # [B, m, d]
        block_mask = self.block_mask(mask_blocks).unflatten(0, (B, m))
        o = self.inter(v, block_mask, block_len=0)
        gate = torch.sigmoid(self.gate_o(o) + self.gate_v(v))
        e = gate * o + (1 - gate) * v  # [B, m, d]
        return e[:, torch.arange(n, device=h.device) // r]  # block l's e_l at each of its tokens

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = checked_mask(x, mask, self.d)
        if self.block_len == "auto" and _one_graph_for_every_length(x.shape[1]):
            raise ValueError(
                'block_len="auto" takes r from the padded length, so no one graph serves a '
                "symbolic length: build the model with an int block_len "
                "(blosa.nn.block_len_for_dataset gives the paper's) or export a fixed length")
        r = resolve_block_len(self.block_len, x.shape[1])
        if self.block_len == "auto" and torch.jit.is_tracing():
            # The trace keeps this r at every length; eager would not. One warning says so, where
            # torch's TracerWarnings about the shape checks would bury it.
            warnings.warn(
                f'block_len="auto" takes r from the padded length: this trace uses r = {r} (that '
                f"of length {int(x.shape[1])}) at every length, where eager changes it. Build the "
                "model with an int block_len (blosa.nn.block_len_for_dataset gives the paper's) "
                "for a trace that matches eager at every length", stacklevel=2)
        parts = [x]
        h = x
        if self.use_local:
            h = self.intra(x, mask, block_len=r)
            parts.append(h)
        if self.use_global:
            parts.append(self.global_context(h, mask, r))
        fused = torch.cat(parts, dim=-1)
        gate = torch.sigmoid(self.fuse_g(fused))
        return zero_padding(gate * self.fuse_f(fused) + (1 - gate) * x, mask)

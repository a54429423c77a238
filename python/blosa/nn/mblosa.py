"""mBloSA: masked block self-attention (paper section 3.1)."""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx.experimental.symbolic_shapes import statically_known_true

from blosa.nn.block_len import resolve_block_len
from blosa._validate import check_direction
from blosa.nn.layers import check_width, checked_mask, get_activation
from blosa.nn.source2token import masked_pool
from blosa.nn.stacked import StackedDense
from blosa.nn.stacked_attention import StackedMaskedAttention
from blosa.nn.token_rows import TokenRows


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

    `direction` is one ("forward", "backward", ...) or a tuple of k: then k mBloSAs with their
    own parameters run as one, every layer a batched matmul over the directions (Bi-BloSA's
    two). The computation is arranged for speed, the math unchanged:
      - layers reading one input are one matmul: W1|W2 of each attention, F|G of the fusion,
        and W_g1 o + W_g2 v as [W_g1; W_g2] [o; v];
      - the fusion's E part W_f[E] E is computed on the m block vectors and added to the r tokens
        of each block (E is constant within a block): a third of the fusion's FLOPs saved. Its
        dropout is therefore drawn once a block, not once a token;
      - per-token layers run on the rows of blosa.nn.token_rows.TokenRows: the real tokens only
        where the batch is padded enough (eager, CPU), so padding costs no matmul.

    Parameters (k directions; d_t = d * (1 + use_local)): intra.proj.weight [k, 2, d, d] and
    intra.bias [k, d] (W1, W2, b1); block_hidden, block_score [k, 1, d, d] (+ biases; the block
    source2token); inter.* as intra's; gate.weight [k, 1, 2d, d] ([W_g1; W_g2]), gate.bias;
    fuse_tok.weight [k, 2, d_t, d] (F's and G's rows for [x; h]), fuse_tok.bias [k, 2, d];
    fuse_blk.weight [k, 2, d, d] (their rows for E). Checkpoints of the former layout (one
    direction, a module per layer) are converted on load (blosa.nn.checkpoint_compat).

    Shapes: x [B, n, d] (one direction) or [k, B, n, d] (a tuple), mask [B, n] bool (None: every
    token real) -> u of x's shape.
    """

    def __init__(self, d: int, direction: str | tuple[str, ...], block_len: int | str = "auto",
                 activation="relu", dropout: float = 0.0, scale: float = 5.0, backend: str = "auto",
                 use_local: bool = True, use_global: bool = True):
        super().__init__()
        check_width("d", d)
        self.stacked = not isinstance(direction, str)
        self.directions = tuple(direction) if self.stacked else (direction,)
        if not self.directions:
            raise ValueError("direction must be a direction or a non-empty tuple of them")
        for one in self.directions:
            check_direction(one)
        resolve_block_len(block_len, 1)  # validate now, not at the first batch
        self.block_len = block_len
        self.d = d
        self.use_local, self.use_global = use_local, use_global
        self.act = get_activation(activation)
        k = len(self.directions)
        attn = dict(scale=scale, dropout=dropout, backend=backend)
        if use_local:
            self.intra = StackedMaskedAttention(d, self.directions, **attn)
        d_fuse = d * (1 + use_local + use_global)
        d_tok = d * (1 + use_local)
        if use_global:
            self.block_hidden = StackedDense(k, 1, d, d, activation=activation, dropout=dropout)
            self.block_score = StackedDense(k, 1, d, d, dropout=dropout)
            self.inter = StackedMaskedAttention(d, self.directions, **attn)
            self.gate = StackedDense(k, 1, 2 * d, d, dropout=dropout, fan=(d, d))
            self.fuse_blk = StackedDense(k, 2, d, d, bias=False, dropout=dropout, fan=(d_fuse, d))
        self.fuse_tok = StackedDense(k, 2, d_tok, d, dropout=dropout, fan=(d_fuse, d))
        from blosa.nn.checkpoint_compat import register_mblosa_compat

        register_mblosa_compat(self)

    def extra_repr(self) -> str:
        ablated = [f"{name}=False" for name in ("use_local", "use_global") if not getattr(self, name)]
        direction = self.directions if self.stacked else self.directions[0]
        return ", ".join([f"d={self.d}", f"direction={direction!r}", f"block_len={self.block_len!r}",
                          *ablated])

    @staticmethod
    def block_mask(mask_blocks: torch.Tensor) -> torch.Tensor:
        """[B*m, r] token mask -> [B*m] block mask: a block with no real token is no key or query
        of the inter-block attention (the authors' code forgot this; see MODEL_NOTES)."""
        return mask_blocks.any(dim=1)

    @staticmethod
    def blocks(t: torch.Tensor, mask: torch.Tensor, r: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """t [k, B, n, f] (mask [B, n]) -> blocks [k, B*m, r, f], their mask [B*m, r] and m: a
        reshape, after zero-padding n to m*r where r does not divide it."""
        B, n = mask.shape
        m = -(-n // r)
        # So that with a symbolic n (torch.compile(dynamic=True), torch.export) one graph holds
        # for every length, blocks are gathered by index (padding and reshaping guarded on r
        # not dividing n), and a traced graph has one more block, all padding (merging B and m
        # guards on m > 1): it has no real token, so the inter-block attention masks it out.
        compiling = torch.compiler.is_compiling()
        if compiling or torch.jit.is_tracing():  # a jit trace: no Python branch on its n
            if compiling and n > 0:
                m += 1
            pos = torch.arange(m, device=t.device)[:, None] * r + torch.arange(r, device=t.device)  # [m, r]
            past_end = pos >= n  # padding
            index = pos.clamp(max=n - 1)
            t_blocks = t[:, :, index].masked_fill(past_end[:, :, None], 0.0).flatten(1, 2)
            return t_blocks, (mask[:, index] & ~past_end).flatten(0, 1), m
        if m * r != n:
            t = F.pad(t, (0, 0, 0, m * r - n))
            mask = F.pad(mask, (0, m * r - n), value=False)
        return t.reshape(t.shape[0], B * m, r, t.shape[-1]), mask.reshape(B * m, r), m

    def global_context(self, h: torch.Tensor, rows: TokenRows, r: int) -> tuple[torch.Tensor, int]:
        """Block vectors e [k, B*m, d] (and m) from the rows h [k, N, d]: block source2token v,
        inter-block attention o, gate."""
        B = rows.B
        logits = self.block_score(self.block_hidden(h).squeeze(1)).squeeze(1)  # [k, N, d], on rows only
        both = rows.padded(torch.cat([logits, h], dim=-1))  # [k, B, n, 2d]: one scatter, one pad
        both, mask_blocks, m = self.blocks(both, rows.mask, r)
        logits_b, h_b = both.split(self.d, dim=-1)
        v = masked_pool(logits_b, h_b, mask_blocks)  # [k, B*m, d]
        block_rows = TokenRows(self.block_mask(mask_blocks).view(B, m), packed=False)
        o = self.inter(v, block_rows, block_len=0)
        gate = torch.sigmoid(self.gate(torch.cat([o, v], dim=-1)).squeeze(1))
        return gate * o + (1 - gate) * v, m

    def resolve_block_len(self, n) -> int:
        """r for padded length n; under a trace or an export, first what "auto" cannot do there."""
        if self.block_len == "auto" and _one_graph_for_every_length(n):
            raise ValueError(
                'block_len="auto" takes r from the padded length, so no one graph serves a '
                "symbolic length: build the model with an int block_len "
                "(blosa.nn.block_len_for_dataset gives the paper's) or export a fixed length")
        r = resolve_block_len(self.block_len, n)
        if self.block_len == "auto" and torch.jit.is_tracing():
            # The trace keeps this r at every length; eager would not. One warning says so, where
            # torch's TracerWarnings about the shape checks would bury it.
            warnings.warn(
                f'block_len="auto" takes r from the padded length: this trace uses r = {r} (that '
                f"of length {int(n)}) at every length, where eager changes it. Build the "
                "model with an int block_len (blosa.nn.block_len_for_dataset gives the paper's) "
                "for a trace that matches eager at every length", stacklevel=2)
        return r

    def forward_rows(self, x: torch.Tensor, rows: TokenRows) -> torch.Tensor:
        """The mBloSAs on rows: x [k, N, d] (rows.rows of the input) -> u [k, N, d]."""
        r = self.resolve_block_len(rows.n)
        h = x
        if self.use_local:
            h = self.intra(x, rows, block_len=r)
        fg = self.fuse_tok(torch.cat([x, h], dim=-1) if self.use_local else x)  # [k, 2, N, d]
        if self.use_global:
            e, m = self.global_context(h, rows, r)
            fg = rows.add_blocks(fg, self.fuse_blk(e), r, m)
        f, g = fg.unbind(1)  # unbind, not indexing: one backward op, not a zeroed copy each
        gate = torch.sigmoid(g)
        return rows.zero_padding(gate * self.act(f) + (1 - gate) * x)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.stacked:
            if x.dim() != 4 or x.shape[0] != len(self.directions):
                raise ValueError(f"x must be [{len(self.directions)}, B, n, {self.d}] (a slice a "
                                 f"direction), got {tuple(x.shape)}")
            mask = checked_mask(x[0], mask, self.d)
        else:
            mask = checked_mask(x, mask, self.d)
        rows = TokenRows(mask)
        u = rows.padded(self.forward_rows(rows.rows(x if self.stacked else x[None]), rows))
        return u if self.stacked else u[0]

"""Checkpoints of the former Bi-BloSA and DiSAN layouts (a module per layer and per direction)
loaded into the stacked ones (blosa.nn.stacked): their state_dict keys are converted when loading.

Former keys, per direction under a prefix p (Bi-BloSA: p = "fw." and "bw.", its dense layers
"fc_fw." and "fc_bw."); nn.Linear weights are [out, in], the stacked ones [in, out]:
    p intra.w1/w2.linear.weight, p intra.bias                -> intra.proj.weight, intra.bias
    p block_s2t.hidden_layer/score_layer.linear.{weight,bias} -> block_hidden, block_score
    p inter.*                                                 -> inter.* (as intra)
    p gate_o.linear.weight, p gate_v.linear.{weight,bias}     -> gate.weight ([W_o; W_v]), gate.bias
    p fuse_f/fuse_g.linear.{weight,bias}                      -> fuse_tok (rows of [x; h]), fuse_blk (rows of E)
DiSAN (p = "fw." and "bw."; new keys under "disa."):
    p dense_map.linear.{weight,bias}                          -> dense_map.weight, dense_map.bias
    p attn.w1/w2.linear.weight, p attn.bias                   -> attn.proj.weight, attn.bias
    p fuse_rep.linear.weight, p fuse_attn.linear.{weight,bias} -> fuse.weight ([W_rep; W_attn]), fuse.bias
"""
from __future__ import annotations

import torch


def _w(sd: dict, key: str) -> torch.Tensor:
    return sd.pop(key).transpose(0, 1)


def convert_mblosa(sd: dict, old: list[str], new: str) -> bool:
    """Replace, in state_dict `sd`, the former mBloSA keys under the prefixes `old` (one a
    direction, in the stacked order) by the stacked keys under `new`. Works on any dict of
    tensors keyed alike (gradients too). The ablation (use_local, use_global) is the
    checkpoint's own: loading it into a model with another then fails on its keys, as it did.
    Returns whether there was anything to convert."""
    if not all(f"{p}fuse_f.linear.weight" in sd for p in old):
        return False
    d = sd[f"{old[0]}fuse_f.linear.weight"].shape[0]
    use_local, use_global = f"{old[0]}intra.bias" in sd, f"{old[0]}inter.bias" in sd
    out: dict[str, list[torch.Tensor]] = {}

    def put(key: str, value: torch.Tensor) -> None:
        out.setdefault(new + key, []).append(value)

    d_tok = d * (1 + use_local)
    for p in old:
        for name in ("intra", "inter") if use_global else ("intra",):
            if name == "intra" and not use_local:
                continue
            put(f"{name}.proj.weight", torch.stack([_w(sd, f"{p}{name}.w1.linear.weight"),
                                                    _w(sd, f"{p}{name}.w2.linear.weight")]))
            put(f"{name}.bias", sd.pop(f"{p}{name}.bias"))
        if use_global:
            for layer, key in (("hidden_layer", "block_hidden"), ("score_layer", "block_score")):
                put(f"{key}.weight", _w(sd, f"{p}block_s2t.{layer}.linear.weight")[None])
                put(f"{key}.bias", sd.pop(f"{p}block_s2t.{layer}.linear.bias")[None])
            put("gate.weight", torch.cat([_w(sd, f"{p}gate_o.linear.weight"),
                                          _w(sd, f"{p}gate_v.linear.weight")])[None])
            put("gate.bias", sd.pop(f"{p}gate_v.linear.bias")[None])
        f, g = _w(sd, f"{p}fuse_f.linear.weight"), _w(sd, f"{p}fuse_g.linear.weight")
        put("fuse_tok.weight", torch.stack([f[:d_tok], g[:d_tok]]))
        put("fuse_tok.bias", torch.stack([sd.pop(f"{p}fuse_f.linear.bias"), sd.pop(f"{p}fuse_g.linear.bias")]))
        if use_global:
            put("fuse_blk.weight", torch.stack([f[d_tok:], g[d_tok:]]))
    sd.update({key: torch.stack(values).contiguous() for key, values in out.items()})
    return True


def convert_dense(sd: dict, old: list[str], new: str) -> bool:
    """Former Dense layers under prefixes `old` (one a stacked slice) -> one StackedDense `new`."""
    if not all(f"{p}linear.weight" in sd for p in old):
        return False
    sd[new + "weight"] = torch.stack([_w(sd, f"{p}linear.weight")[None] for p in old]).contiguous()
    if all(f"{p}linear.bias" in sd for p in old):
        sd[new + "bias"] = torch.stack([sd.pop(f"{p}linear.bias")[None] for p in old])
    return True


def convert_disa(sd: dict, old: list[str], new: str) -> bool:
    """Former DiSA layers (MaskedSelfAttention) under prefixes `old` (one a direction) -> one
    StackedMaskedSelfAttention `new`: dense_map, attn (W1|W2, bias), fuse ([W_f1; W_f2], the
    bias of W_f2's former layer)."""
    if not all(f"{p}fuse_rep.linear.weight" in sd for p in old):
        return False
    convert_dense(sd, [p + "dense_map." for p in old], new + "dense_map.")
    sd[new + "attn.proj.weight"] = torch.stack([
        torch.stack([_w(sd, f"{p}attn.w1.linear.weight"), _w(sd, f"{p}attn.w2.linear.weight")])
        for p in old]).contiguous()
    sd[new + "attn.bias"] = torch.stack([sd.pop(f"{p}attn.bias") for p in old])
    sd[new + "fuse.weight"] = torch.stack([
        torch.cat([_w(sd, f"{p}fuse_rep.linear.weight"), _w(sd, f"{p}fuse_attn.linear.weight")])[None]
        for p in old]).contiguous()
    sd[new + "fuse.bias"] = torch.stack([sd.pop(f"{p}fuse_attn.linear.bias")[None] for p in old])
    return True


def former_layout(state_dict: dict) -> bool:
    """Whether a state_dict holds mBloSA or DiSA keys of the former layout (converted when
    loaded)."""
    return any(key.endswith(("fuse_f.linear.weight", "fuse_rep.linear.weight"))
               for key in state_dict)


def register_mblosa_compat(module) -> None:
    """A one-direction MaskedBlockSelfAttention loads its former keys (no prefix of its own)."""
    def hook(state_dict, prefix, *args):
        if not module.stacked:
            convert_mblosa(state_dict, [prefix], prefix)

    module._register_load_state_dict_pre_hook(hook)


def register_disan_compat(module) -> None:
    """DiSAN loads its former keys: fw., bw. (a MaskedSelfAttention each) -> disa."""
    def hook(state_dict, prefix, *args):
        convert_disa(state_dict, [prefix + "fw.", prefix + "bw."], prefix + "disa.")

    module._register_load_state_dict_pre_hook(hook)


def register_bi_blosa_compat(module) -> None:
    """BiBloSA loads its former keys: fc_fw., fc_bw. -> fc.; fw., bw. -> mblosa."""
    def hook(state_dict, prefix, *args):
        convert_dense(state_dict, [prefix + "fc_fw.", prefix + "fc_bw."], prefix + "fc.")
        convert_mblosa(state_dict, [prefix + "fw.", prefix + "bw."], prefix + "mblosa.")

    module._register_load_state_dict_pre_hook(hook)

"""Parameter counts of the paper's SNLI configurations, beside Table 1's |theta|.

    python -m blosa.nn.param_count

|theta| in Tables 1 and 3 excludes the word embeddings but, by our reading, includes the NLI
classifier: the "w/o mBloSA" rows (0.54m, 0.45m) are matched only with it. The classifier here is
the paper's section 4.1 head: [s_p; s_h; s_p - s_h; s_p * s_h] -> 300D dense -> 3 classes (the
authors' code adds a highway layer, which the paper does not describe and the counts exclude).
"""
from __future__ import annotations

import argparse

from torch import nn

from blosa.nn.registry import build_encoder

D_EMBED = 300
# name, registry name, hidden, paper's |theta| in Table 1 / Table 3 (millions)
SNLI_CONFIGS = [
    ("Bi-LSTM (600D)", "bilstm", 300, 2.9),
    ("Bi-GRU (600D)", "bigru", 300, 2.5),
    ("Bi-SRU (600D)", "bisru", 300, 2.0),
    ("Multi-CNN (600D)", "multi_cnn", 300, 1.4),
    ("Hrchy-CNN (300D)", "hrchy_cnn", 300, 3.4),
    ("Multi-head (600D)", "multi_head", 300, 2.0),
    ("DiSAN (600D)", "disan", 300, 2.3),
    ("Bi-BloSAN (480D)", "biblosan", 240, 2.8),
    ("Bi-BloSAN w/o Local", "biblosan_no_local", 240, 2.5),
    ("Bi-BloSAN w/o Global", "biblosan_no_global", 240, 1.8),
    ("Bi-BloSAN w/o mBloSA", "biblosan_no_mblosa", 240, 0.54),
    ("Bi-BloSAN w/o mBloSA & s2t", "biblosan_no_mblosa_no_s2t", 240, 0.45),
]


def nli_head(sentence_dim: int, hidden: int = 300, classes: int = 3) -> nn.Module:
    """The paper's SNLI classifier on [s_p; s_h; s_p - s_h; s_p * s_h] [B, 4 D'] -> logits [B, 3]."""
    return nn.Sequential(nn.Linear(4 * sentence_dim, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def snli_counts() -> list[dict]:
    """One row per SNLI configuration: encoder and classifier parameters, and the paper's value."""
    rows = []
    for label, name, hidden, paper in SNLI_CONFIGS:
        enc = build_encoder(name, D_EMBED, hidden)
        n_enc, n_head = count(enc), count(nli_head(enc.sentence_dim))
        rows.append(dict(model=label, name=name, hidden=hidden, sentence_dim=enc.sentence_dim,
                         encoder=n_enc, head=n_head, total=n_enc + n_head, paper_m=paper))
    return rows


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(f"SNLI configurations, {D_EMBED}-d embeddings (excluded); |theta| = encoder + NLI classifier")
    print(f"| {'model':<28} | {'name':<24} |  D' | {'encoder':>9} | {'classifier':>10} | {'|theta|':>9} | ours (m) | paper (m) |")
    print(f"|{'-' * 30}|{'-' * 26}|-----|{'-' * 11}|{'-' * 12}|{'-' * 11}|----------|-----------|")
    for r in snli_counts():
        print(f"| {r['model']:<28} | {r['name']:<24} | {r['sentence_dim']:>3} | {r['encoder']:>9,} | "
              f"{r['head']:>10,} | {r['total']:>9,} | {r['total'] / 1e6:>8.2f} | {r['paper_m']:>9} |")


if __name__ == "__main__":
    main()

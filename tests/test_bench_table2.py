"""blosa.bench.snli's SNLI-shaped data and model, and blosa.bench.table2's measurement and table."""
import pytest
import torch

from blosa.bench import snli, table2


@pytest.mark.parametrize("mean", [snli.PREMISE_MEAN, snli.HYPOTHESIS_MEAN])
def test_sampled_lengths_have_the_stated_mean_and_spread(mean):
    lengths = snli.sample_lengths(200_000, mean, torch.Generator().manual_seed(0)).double()
    assert lengths.min() >= 1 and lengths.max() <= snli.MAX_LENGTH
    assert lengths.mean().item() == pytest.approx(mean, rel=0.02)
    assert (lengths.std() / lengths.mean()).item() == pytest.approx(snli.LENGTH_CV, rel=0.1)


def test_a_pair_batch_is_right_padded_ids_with_masks():
    p_ids, p_mask, h_ids, h_mask, labels = snli.pair_batch(64, 50, torch.Generator().manual_seed(1))
    for ids, mask in ((p_ids, p_mask), (h_ids, h_mask)):
        assert ids.shape == mask.shape and ids.shape[0] == 64 and mask.dtype == torch.bool
        assert mask[:, 0].all() and mask.any(dim=0).all()  # no empty sentence; the longest fills n
        assert (ids[~mask] == 0).all() and (ids[mask] >= 1).all() and (ids < 50).all()
        lengths = mask.sum(1)
        assert torch.equal(mask, torch.arange(mask.shape[1])[None, :] < lengths[:, None])
    assert labels.shape == (64,) and set(labels.tolist()) <= {0, 1, 2}


def test_the_nli_model_shares_one_encoder_and_gives_three_logits():
    model = snli.NLIModel("biblosan", hidden=8, vocab=30, d=16)
    batch = snli.pair_batch(3, 30, torch.Generator().manual_seed(2))
    assert model(*batch[:4]).shape == (3, 3)
    assert model.head[1].in_features == 4 * model.encoder.sentence_dim


def test_one_encoder_is_measured_here():
    r = table2.measure_encoder("multi_cnn", "cpu", steps=2, inference_batches=1, vocab=1000)
    assert r["step_seconds"] > 0 and r["infer_seconds"] > 0 and r["static_mib"] > 0 and r["peak_mib"] >= 0
    assert r["premise_len"] > r["hypothesis_len"] >= 1
    assert r["train_gflop"] > r["infer_gflop"] > 0 and r["sgemm_gflops"] > 0


def test_the_table_puts_ours_beside_the_paper_relative_to_biblosan():
    ours = dict(step_seconds=0.1, peak_mib=90.0, static_mib=10.0, infer_seconds=0.05, steps=5,
                inference_batches=2, threads=1, premise_len=30.0, hypothesis_len=18.0)
    results = {"bilstm": {**ours, "step_seconds": 0.4}, "biblosan": ours,
               "disan": {"error": "out of memory"}, "disan[reference]": {**ours, "peak_mib": 190.0}}
    text = table2.markdown(results, "cpu", ["# header"])
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    # 0.1 s x 8,584 steps = 858 s an epoch; 90 + 10 = 100 MiB; 0.05 s x 99 batches = 4.95 s.
    assert rows["| 480D Bi-BloSAN"] == ("| 480D Bi-BloSAN | 508 (1.00) | 858 (1.00) | 1,243 (1.00) "
                                       "| 100 (1.00) | 3.4 (1.00) | 5.0 (1.00) | - | - |")
    assert "| 2,080 (4.09) | 3,434 (4.00) |" in rows["| Bi-LSTM"]
    assert "out of memory" in rows["| DiSAN"] and "| Bi-GRU" not in rows
    assert "| 2,267 (1.82) | 200 (2.00) |" in rows["| DiSAN (reference attention)"]
    assert "mean of 4 steps (a reduced number, on the CPU)" in text


def test_the_table_gives_each_time_as_a_multiple_of_its_matmul_bound():
    ours = dict(step_seconds=0.3, peak_mib=90.0, static_mib=10.0, infer_seconds=0.05, steps=5,
                inference_batches=2, threads=1, premise_len=30.0, hypothesis_len=18.0,
                train_gflop=6.0, infer_gflop=1.5, sgemm_gflops=100.0)
    text = table2.markdown({"biblosan": ours}, "cpu", ["# header"])
    # 6 GFLOP at 100 GFLOP/s: 0.06 s, 0.3 s its 5.00x; 1.5 GFLOP: 0.015 s, 0.05 s its 3.33x
    assert "| 5.00 (6.00 GFLOP at 100 GFLOP/s) | 3.33 (1.50 GFLOP at 100 GFLOP/s) |" in text
    assert "float32 matmul rate on 1 thread(s)" in text
    assert table2.bound_multiple({"step_seconds": 1.0, "train_gflop": 0.0, "sgemm_gflops": 50.0},
                                 "step_seconds", "train_gflop") is None


def test_interleaved_times_every_encoder_on_the_same_batches():
    from blosa.bench import interleaved

    results = interleaved.measure_interleaved(["multi_cnn", "biblosan"], steps=2, inference_batches=2, vocab=200)
    for r in results.values():
        assert r["step_seconds"] > 0 and r["infer_seconds"] > 0 and r["train_gflop"] > r["infer_gflop"] > 0
    text = interleaved.markdown(results, ["# h"])
    assert "| Multi-CNN |" in text and "| 480D Bi-BloSAN |" in text and "vs Multi-CNN" in text

"""A short real training run of each task family beats chance by a clear margin: classification
(TREC), relatedness (SICK), NLI (SICK-E) on the shared files; NLI in SNLI's format and sentence
selection in SQuAD's on small files written here. Tiny models, a few hundred steps at most."""
import json
import random

from blosa.train.config import TrainConfig
from blosa.train.run import train
from shared_data import requires_shared_data
from small_data import write_snli, write_squad

TINY = dict(hidden=16, head_hidden=16, vectors="glove-50d", dropout=0.0, eval_batch_size=256)


def run(tmp_path, **kw):
    config = TrainConfig(**{**TINY, **kw})
    result = train(config, tmp_path / "run", quiet=True)
    assert json.loads((tmp_path / "run" / "result.json").read_text()) == result
    return result


@requires_shared_data
def test_classification_trec(tmp_path):
    # Majority class: 138 of TREC's 500 test questions (27.6%).
    result = run(tmp_path, task="trec", optimizer="adam", lr=3e-3, batch_size=32, max_steps=150,
                 eval_every=50, seed=11)
    assert result["test"]["accuracy"] > 0.6, result


@requires_shared_data
def test_relatedness_sick(tmp_path):
    result = run(tmp_path, task="sick", encoder="multi_head", optimizer="adam", lr=3e-3,
                 batch_size=32, max_steps=140, eval_every=70, seed=12)
    assert result["test"]["pearson"] > 0.4, result
    assert set(result["test"]) == {"pearson", "spearman", "mse"}


@requires_shared_data
def test_nli_sick_e(tmp_path):
    # Majority class (neutral): 56.7% of SICK's test pairs.
    result = run(tmp_path, task="sick_e", encoder="multi_head", optimizer="adam", lr=3e-3,
                 batch_size=32, max_steps=300, eval_every=100, seed=13)
    assert result["test"]["accuracy"] > 0.62, result


def test_nli_snli_format(tmp_path):
    write_snli(tmp_path / "data" / "snli_1.0", random.Random(14), 1500)
    result = run(tmp_path, task="snli", encoder="biblosan", data_dir=str(tmp_path / "data"),
                 optimizer="adam", lr=3e-3, batch_size=32, max_steps=120, eval_every=60,
                 seed=14)
    assert result["test"]["accuracy"] > 0.6, result  # chance: 1/3


def test_selection_squad_format(tmp_path):
    write_squad(tmp_path / "data" / "squad", random.Random(15), 300)
    result = run(tmp_path, task="squad", encoder="biblosan", data_dir=str(tmp_path / "data"),
                 optimizer="adam", lr=3e-3, batch_size=16, max_steps=120, eval_every=60,
                 seed=15)
    assert result["test"]["accuracy"] > 0.5, result  # chance: 1/4

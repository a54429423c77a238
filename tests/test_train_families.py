"""A short real training run of each task family beats chance by a clear margin: classification
(TREC), relatedness (SICK), NLI (SICK-E) on the shared files; NLI in SNLI's format and sentence
selection in SQuAD's on small files written here. Tiny models, a few hundred steps at most."""
import json
import random

import pytest

from blosa.train.config import TrainConfig
from blosa.train.run import train
from shared_data import SHARED_DATA, requires_shared_data

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
                 batch_size=32, max_steps=140, eval_every=70, seed=13)
    assert result["test"]["accuracy"] > 0.65, result


WORDS = ("man woman dog cat child player horse bird cook girl boy runs eats sleeps jumps sings "
         "plays walks reads swims climbs").split()


def write_snli(folder, rng, n):
    """SNLI 1.0 jsonl where the label follows from the words: the same sentence entails, one
    with "not" contradicts, another sentence is neutral."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", n), ("dev", n // 5), ("test", n // 5)):
        with open(folder / f"snli_1.0_{split}.jsonl", "w") as f:
            for _ in range(count):
                premise = [rng.choice(WORDS[:10]), rng.choice(WORDS[10:])]
                label = rng.choice(["entailment", "neutral", "contradiction"])
                hyp = {"entailment": premise,
                       "contradiction": [premise[0], "not", premise[1]],
                       "neutral": [rng.choice(WORDS[:10]), rng.choice(WORDS[10:])]}[label]
                parse = lambda ws: "( " + " ".join(ws) + " )"
                f.write(json.dumps({"gold_label": label, "sentence1": " ".join(premise),
                                    "sentence2": " ".join(hyp),
                                    "sentence1_binary_parse": parse(premise),
                                    "sentence2_binary_parse": parse(hyp)}) + "\n")


def test_nli_snli_format(tmp_path):
    write_snli(tmp_path / "data" / "snli_1.0", random.Random(14), 1500)
    result = run(tmp_path, task="snli", encoder="biblosan", data_dir=str(tmp_path / "data"),
                 optimizer="adam", lr=3e-3, batch_size=32, max_steps=200, eval_every=100,
                 seed=14)
    assert result["test"]["accuracy"] > 0.6, result  # chance: 1/3


def write_squad(folder, rng, n_articles):
    """SQuAD v1.1 json: each question asks for the one sentence of its passage that holds its
    subject word."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, count in (("train-v1.1.json", n_articles), ("dev-v1.1.json", n_articles // 4)):
        data = []
        for _ in range(count):
            subjects = rng.sample(WORDS[:10], 4)
            sentences = [f"The {s} {rng.choice(WORDS[10:])} ." for s in subjects]
            context = " ".join(sentences)
            qas = []
            for k, s in enumerate(subjects):
                start = context.index(sentences[k])
                qas.append({"id": f"{len(data)}-{k}", "question": f"What does the {s} do ?",
                            "answers": [{"text": sentences[k].split()[2],
                                         "answer_start": start + len(f"The {s} ")}]})
            data.append({"title": "t", "paragraphs": [{"context": context, "qas": qas}]})
        (folder / name).write_text(json.dumps({"version": "1.1", "data": data}))


def test_selection_squad_format(tmp_path):
    write_squad(tmp_path / "data" / "squad", random.Random(15), 300)
    result = run(tmp_path, task="squad", encoder="biblosan", data_dir=str(tmp_path / "data"),
                 optimizer="adam", lr=3e-3, batch_size=16, max_steps=200, eval_every=100,
                 seed=15)
    assert result["test"]["accuracy"] > 0.5, result  # chance: 1/4

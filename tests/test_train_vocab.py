"""--vocab vectors: the training words, then every other word of the word vectors with its
pretrained row frozen (blosa.train.frozen_rows), at training, dev, test, blosa eval and encode."""
import io
import json
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from blosa.data import Vocab, WordVectors, words_beyond
from blosa.train.config import TrainConfig, validate
from blosa.train.frozen_rows import FrozenRowsEmbedding
from blosa.train.inference import evaluate_run, load_run
from blosa.train.run import train
from test_train_run import WORDS, write_generic


def random_words(rng, count):
    letters = "abcdefghij"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(1, 6))) for _ in range(count)]


def test_words_beyond_takes_every_other_vector_word_once_in_order():
    rng = random.Random(random.randrange(2**32))
    words = random_words(rng, 60) + ["<unk>", "<pad>", "Cased", "cased", "UPPER", "two words"]
    rng.shuffle(words)
    vectors = WordVectors(words, np.random.default_rng(rng.randrange(2**32)).normal(
        size=(len(words), 4)))
    vocab = Vocab.build([rng.sample(words[:40], 10)])
    got, rows = words_beyond(vocab, vectors)

    expected, row_of = [], {}
    for i, word in enumerate(words):  # a plain restatement: lowercase words win their row
        key = word.lower()
        if key in ("<unk>", "<pad>") or " " in key or key in vocab.words:
            continue
        if key not in row_of:
            expected.append(key)
        if key not in row_of or (word == key and words[row_of[key]] != key):
            row_of[key] = i
    assert got == expected
    np.testing.assert_array_equal(rows, vectors.vectors[[row_of[w] for w in expected]])
    assert rows.dtype == np.float32 and rows.shape == (len(got), 4)
    extended = Vocab(vocab.words + got)  # a valid vocabulary: distinct, lowercase
    assert extended.encode(["UPPER"]) == [len(vocab) + got.index("upper")]


def make_embedding(rng, trained=7, frozen=5, dim=3):
    weight = torch.randn(trained, dim, generator=rng)
    rows = torch.randn(frozen, dim, generator=rng).numpy()
    return FrozenRowsEmbedding.with_frozen_rows(weight, rows, freeze=False,
                                                padding_idx=Vocab.PAD), weight, rows


def test_frozen_rows_read_beyond_the_trained_ones_and_no_gradient_reaches_them():
    rng = torch.Generator().manual_seed(random.randrange(2**32))
    embedding, weight, rows = make_embedding(rng)
    ids = torch.randint(0, 12, (4, 9), generator=rng)
    table = torch.cat([weight, torch.from_numpy(rows)])
    torch.testing.assert_close(embedding(ids), table[ids], rtol=0, atol=0)
    embedding(ids).sum().backward()
    counts = torch.bincount(ids[ids < 7].flatten(), minlength=7).float()
    counts[Vocab.PAD] = 0  # nn.Embedding's padding row gets no gradient
    torch.testing.assert_close(embedding.weight.grad, counts[:, None].expand(7, 3))
    assert set(embedding.state_dict()) == {"weight", "frozen_digest"}  # not the rows

    # Word dropout drops trained words to <unk>; the frozen rows are read as they are (at p = 1
    # every time: at 0.999 one word in a thousand stayed and the test failed now and then).
    embedding.word_dropout = 1.0  # every trained word dropped (torch.rand < 1 always)
    out = embedding.train()(ids)
    beyond = ids >= 7
    torch.testing.assert_close(out[beyond], table[ids][beyond])
    assert torch.all(out[~beyond & (ids != Vocab.PAD)] == weight[Vocab.UNK])


def test_a_checkpoint_of_other_frozen_rows_does_not_load():
    rng = torch.Generator().manual_seed(random.randrange(2**32))
    a, _, _ = make_embedding(rng)
    b, _, _ = make_embedding(rng)
    with pytest.raises(ValueError, match="other frozen word vectors"):
        b.load_state_dict(a.state_dict())
    c, _, rows = make_embedding(rng)
    d = FrozenRowsEmbedding.with_frozen_rows(torch.zeros(7, 3), rows.copy(), freeze=False,
                                             padding_idx=0)
    d.load_state_dict(c.state_dict())  # the same rows: loads
    assert torch.equal(d.weight, c.weight)


def test_vocab_vectors_needs_vectors():
    config = TrainConfig(task="trec", vocab="vectors", vectors="none").resolved()
    with pytest.raises(ValueError, match="^--vocab: .*--vectors is none"):
        validate(config)
    with pytest.raises(ValueError, match="^--vocab: choose from"):
        validate(TrainConfig(task="trec", vocab="all").resolved())


@pytest.mark.parametrize("task", ["trec", "sst2", "sick", "generic"])
def test_vocab_defaults_to_the_vectors_words(task, tmp_path):
    # Every task, with or without a preset: the vectors' vocabulary where there are vectors,
    # the training words' where there are none; a config.json written before --vocab existed
    # reads as the training words' (what those runs ran with).
    for preset in (None, "paper") + (() if task == "generic" else ("best",)):
        assert TrainConfig(task=task, preset=preset).resolved().vocab == "vectors"
        assert TrainConfig(task=task, preset=preset, vectors="none").resolved().vocab == "train"
        assert TrainConfig(task=task, preset=preset, vocab="train").resolved().vocab == "train"
    old = json.loads(TrainConfig(task=task).to_json())
    del old["vocab"]
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert TrainConfig.load(tmp_path / "config.json").resolved().vocab == "train"


def write_glove(path, words, rng, dim=8):
    lines = [f"{w} " + " ".join(f"{x:.5f}" for x in rng.normal(size=dim)) for w in words]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_run_reads_unseen_words_from_the_vectors_at_test_eval_and_encode(tmp_path):
    rng = random.Random(random.randrange(2**32))
    unseen = ["superb", "dreadful"]  # in the vectors, never in training
    glove = write_glove(tmp_path / "vectors.txt", WORDS + unseen + random_words(rng, 30),
                        np.random.default_rng(rng.randrange(2**32)))
    train_file = write_generic(tmp_path / "train.txt", rng, 200)
    test_file = tmp_path / "test.txt"
    test_file.write_text("".join(f"{label} the {word} film\n" for label, word in
                                 [("pos", "superb"), ("neg", "dreadful")] * 10))
    out = tmp_path / "run"
    result = train(TrainConfig(task="generic", train_file=str(train_file),
                               test_file=str(test_file), vectors=str(glove), vocab="vectors",
                               hidden=4, head_hidden=4, max_steps=6, seed=rng.randrange(100)),
                   out, quiet=True)
    assert "+ " in (out / "log.txt").read_text()  # the log line counts the frozen words
    saved = torch.load(out / "best.pt", weights_only=True)["model"]
    train_words = len((out / "vocab.txt").read_text().splitlines())
    assert saved["embedding.weight"].shape[0] == train_words  # the rows are not saved
    assert "superb" not in (out / "vocab.txt").read_text().split()

    config, _, vocab, _, _, model = load_run(out)
    assert vocab.encode(["superb"])[0] >= train_words  # read beyond the trained rows
    assert evaluate_run(out, "test") == {"split": "test", **result["test"]}

    encoded = subprocess.run([sys.executable, "-m", "blosa", "encode", str(out)],
                             input=b"the superb film\nthe dreadful film\nthe zzzz film\n",
                             capture_output=True, check=True)
    vectors = np.load(io.BytesIO(encoded.stdout))
    assert not np.allclose(vectors[0], vectors[1])  # two unseen words, two vectors
    # ... where without the vectors' words both would read as <unk>, the same as "zzzz".
    with torch.no_grad():
        ids = torch.tensor([vocab.encode("the superb film".split())])
        expected = model.encoder(model.embedding(ids), torch.ones_like(ids, dtype=torch.bool))[1]
    np.testing.assert_allclose(vectors[0], expected[0].numpy(), rtol=1e-5, atol=1e-6)

    # The vectors changed since: loading the run says so instead of reading other rows.
    write_glove(glove, WORDS + unseen, np.random.default_rng(0))
    with pytest.raises(ValueError, match="other frozen word vectors"):
        load_run(out)

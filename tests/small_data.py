"""Small files in the official SNLI 1.0 and SQuAD v1.1 formats, whose labels follow from their
words, for the tests and for docs/TRAINING.md's table (the real files are not reachable
offline). `python tests/small_data.py DIR` writes both under DIR in the data layout
(DIR/snli_1.0/, DIR/squad/)."""
import json
import random
import sys
from pathlib import Path

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


if __name__ == "__main__":
    root = Path(sys.argv[1])
    write_snli(root / "snli_1.0", random.Random(14), 1500)
    write_squad(root / "squad", random.Random(15), 300)

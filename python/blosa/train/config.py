"""Every setting of a training run, resolved: the task's defaults (the authors' setups, see
../shared/MODEL_NOTES.md), then the user's flags. A run's config.json is this, written out."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

OPTIMIZERS = ("adadelta", "adam", "adamw", "sgd")
BATCHINGS = ("bucket", "random")
SST_PHRASES = ("distinct", "all", "none")  # blosa.data.datasets.SST_TRAIN
AMP_MODES = ("none", "bf16")
DEVICES = ("cpu", "cuda")
LR_SCHEDULES = ("constant", "linear", "cosine")
VOCABS = ("train", "vectors")

# The authors' setups as coded (MODEL_NOTES.md "Training setups"): optimizer, learning rate, batch
# size, dropout (1 - keep probability), L2 on weight matrices, hidden units. Epochs are ours: the
# paper gives only SNLI's 50.
_SC = dict(optimizer="adam", lr=1e-3, batch_size=32, dropout=0.4, weight_decay=1e-4, epochs=20)
TASK_DEFAULTS: dict[str, dict] = {
    "trec": dict(optimizer="adadelta", lr=0.5, batch_size=32, dropout=0.35, weight_decay=5e-5,
                 epochs=20),
    "sst1": dict(optimizer="adadelta", lr=0.5, batch_size=64, dropout=0.3, weight_decay=1e-4,
                 epochs=10),
    "sst2": dict(optimizer="adadelta", lr=0.5, batch_size=64, dropout=0.3, weight_decay=1e-4,
                 epochs=10),
    "cr": _SC, "mpqa": _SC, "subj": _SC, "generic": _SC,
    "sick": dict(optimizer="adadelta", lr=0.5, batch_size=32, dropout=0.25, weight_decay=1e-4,
                 epochs=20),
    "sick_e": dict(optimizer="adadelta", lr=0.5, batch_size=32, dropout=0.25, weight_decay=1e-4,
                   epochs=20),
    "snli": dict(optimizer="adadelta", lr=0.5, batch_size=64, dropout=0.25, weight_decay=5e-5,
                 epochs=50, head_activation="elu"),
    "squad": dict(optimizer="adadelta", lr=0.5, batch_size=32, dropout=0.25, weight_decay=5e-5,
                  epochs=20, hidden=100, vectors="wink-100d"),
}

# Settings the trainer fills in from the training data once it is read (after the run folder
# was checked): they are no flags, and --resume compares them only then (run.py).
FROM_DATA = ("block_len_dataset",)


# Settings added after runs were made, with the value those runs ran with: their config.json
# lacks them, and resuming or evaluating one must not see a changed setting.
ADDED_LATER = {"vocab": "train", "block_len": "auto"}


@dataclass
class TrainConfig:
    """One run's settings. Those left None take the task's default (TASK_DEFAULTS) in resolve()."""

    task: str
    encoder: str = "biblosan"
    data_dir: str | None = None
    train_file: str | None = None  # generic only
    test_file: str | None = None  # generic only
    vectors: str | None = None  # "glove-50d", "wink-100d", a GloVe file, or "none"
    fine_tune: bool | None = None  # the word vectors train with the model (section 4.1: True)
    vocab: str | None = None  # "train": training words only; "vectors": + the vectors' other words
    hidden: int | None = None  # the encoder's hidden units (blosa.nn.build_encoder's hidden)
    head_hidden: int = 300  # the task head's fully connected layer
    head_activation: str | None = None
    block_len: str | None = None  # Bi-BloSAN's r: "auto", "dataset" or an int, as a string
    block_len_dataset: int | None = None  # the r "dataset" resolved to (FROM_DATA)
    optimizer: str | None = None
    lr: float | None = None
    lr_schedule: str = "constant"  # the learning rate over the run's steps (build.lr_factor)
    adadelta_rho: float | None = None  # None: torch's 0.9 (TensorFlow's: 0.95)
    adadelta_eps: float | None = None  # None: torch's 1e-6 (TensorFlow's: 1e-8)
    batch_size: int | None = None
    eval_batch_size: int = 128
    batching: str = "bucket"  # training batches: "bucket" (of similar lengths) or "random"
    dropout: float | None = None
    word_dropout: float = 0.0  # in training, a word reads as <unk> with this probability
    weight_decay: float | None = None
    epochs: int | None = None
    max_steps: int | None = None  # stop after this many optimizer steps (None: epochs decide)
    eval_every: int | None = None  # steps between evaluations and checkpoints; 0: once an epoch
    patience: int = 0  # stop after this many evaluations without a better dev; 0: never
    seed: int = 0
    folds: int = 0  # k-fold cross-validation; 0: none (datasets without a test split default to 10)
    dev_fraction: float = 0.1  # of train, carved as dev where the dataset has none
    skip_bad_lines: bool = False
    sst_phrases: str = "distinct"  # SST's training nodes: "distinct" phrases once, "all", "none"
    device: str = "cpu"
    amp: str = "none"
    compile: bool = False
    extra: dict = field(default_factory=dict)  # reserved for later versions
    preset: str | None = None  # a named setup of blosa.train.presets, over the task's defaults

    def resolved(self) -> "TrainConfig":
        """A copy with every None that has a default filled in: the preset's setting for the task,
        else the task's default, else hidden 300, ReLU, glove-50d fine-tuned, the vectors' whole
        vocabulary (the training words' alone under --vectors none), the dataset's block length
        for Bi-BloSAN ("auto" for the other encoders), an evaluation every epoch."""
        from blosa.train.presets import preset_settings

        defaults = dict(hidden=300, head_activation="relu", vectors="glove-50d", fine_tune=True,
                        eval_every=0)
        defaults.update(TASK_DEFAULTS.get(self.task, {}))
        defaults.update(preset_settings(self.preset, self.task))
        values = dataclasses.asdict(self)
        for key, value in defaults.items():
            if values.get(key) is None:
                values[key] = value
        if values["block_len"] is None:
            # The authors' one r per dataset for the encoders with blocks (issue 67: faithful,
            # and dev accuracy rose with it on TREC and SST-2); "auto" means nothing to others.
            from blosa.nn import BLOCK_ENCODERS

            values["block_len"] = "dataset" if values["encoder"] in BLOCK_ENCODERS else "auto"
        if values["vocab"] is None:
            # The authors' vocabulary (issue 67: faithful, and dev accuracy rose with it in every
            # cell of docs/RESULTS.md's ablation), where there are vectors to take it from.
            values["vocab"] = "train" if values["vectors"] == "none" else "vectors"
        return TrainConfig(**values)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        values = json.loads(Path(path).read_text())
        for key, value in ADDED_LATER.items():
            values.setdefault(key, value)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: unknown settings {unknown} "
                             "(a config of another blosa version?)")
        return cls(**values)

    def differences(self, other: "TrainConfig") -> dict[str, tuple]:
        """{setting: (self's, other's)} for the settings that differ, but for those the trainer
        fills in from the data (FROM_DATA)."""
        a, b = dataclasses.asdict(self), dataclasses.asdict(other)
        return {k: (a[k], b[k]) for k in a if a[k] != b[k] and k not in FROM_DATA}


def validate(config: TrainConfig) -> None:
    """Raise ValueError naming the bad setting (as its command-line flag) before any work.
    `config` is resolved (TrainConfig.resolved)."""
    import torch

    from blosa.data.datasets import DATASETS
    from blosa.nn import ENCODERS

    def bad(flag, message):
        raise ValueError(f"--{flag.replace('_', '-')}: {message}")

    if config.task not in DATASETS:
        bad("task", f"unknown task {config.task!r}; choose from {sorted(DATASETS)}")
    if config.encoder not in ENCODERS:
        bad("encoder", f"unknown encoder {config.encoder!r}; choose from {sorted(ENCODERS)}")
    spec = DATASETS[config.task]
    if config.task == "generic":
        if not config.train_file:
            bad("train", "the generic task needs --train FILE (and optionally --test FILE)")
    elif config.train_file or config.test_file:
        bad("train", f"--train/--test name the files of the generic task, not of {config.task!r}")
    for flag in ("hidden", "head_hidden", "batch_size", "eval_batch_size", "epochs"):
        value = getattr(config, flag)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            bad(flag, f"must be an int >= 1, got {value!r}")
    if config.max_steps is not None and config.max_steps < 1:
        bad("max_steps", f"must be >= 1, got {config.max_steps}")
    if config.eval_every < 0:
        bad("eval_every", f"must be >= 0 (0: once per epoch), got {config.eval_every}")
    if isinstance(config.patience, bool) or not isinstance(config.patience, int) \
            or config.patience < 0:
        bad("patience", f"must be an int >= 0 (0: no early stopping), got {config.patience!r}")
    if config.optimizer not in OPTIMIZERS:
        bad("optimizer", f"choose from {OPTIMIZERS}, got {config.optimizer!r}")
    if not config.lr > 0:
        bad("lr", f"must be > 0, got {config.lr}")
    if config.lr_schedule not in LR_SCHEDULES:
        bad("lr_schedule", f"choose from {LR_SCHEDULES}, got {config.lr_schedule!r}")
    if not 0 <= config.dropout < 1:
        bad("dropout", f"must be in [0, 1), got {config.dropout}")
    if not 0 <= config.word_dropout < 1:
        bad("word_dropout", f"must be in [0, 1), got {config.word_dropout}")
    if not config.weight_decay >= 0:
        bad("weight_decay", f"must be >= 0, got {config.weight_decay}")
    if not 0 < config.dev_fraction < 1:
        bad("dev_fraction", f"must be in (0, 1), got {config.dev_fraction}")
    has_test = "test" in spec.files or (config.task == "generic" and config.test_file)
    if config.folds == 1 or config.folds < 0:
        bad("folds", f"must be 0 (no cross-validation) or >= 2, got {config.folds}")
    if config.folds and has_test:
        bad("folds", f"{config.task} has a test split; cross-validation is for datasets "
                     "without one")
    if config.block_len != "auto":
        if config.block_len != "dataset" and (not config.block_len.isdigit()
                                              or int(config.block_len) < 1):
            bad("block_len", f'must be "auto", "dataset" or an int >= 1, got {config.block_len!r}')
        if not config.encoder.startswith("biblosan"):
            bad("block_len", f"only Bi-BloSAN has blocks, not {config.encoder}")
    if config.vocab not in VOCABS:
        bad("vocab", f"choose from {VOCABS}, got {config.vocab!r}")
    if config.vocab == "vectors" and config.vectors == "none":
        bad("vocab", "vectors takes the words of the word vectors, and --vectors is none")
    if config.device not in DEVICES:
        bad("device", f"choose from {DEVICES}, got {config.device!r}")
    if config.device == "cuda" and not torch.cuda.is_available():
        bad("device", "cuda was asked for, but torch sees no CUDA device here")
    if config.amp not in AMP_MODES:
        bad("amp", f"choose from {AMP_MODES}, got {config.amp!r}")
    _validate_fidelity_options(config, bad)


def _validate_fidelity_options(config: TrainConfig, bad) -> None:
    """The options that bring a run closer to the authors' code: --block-len dataset's resolved
    r, --sst-phrases, --batching, --adadelta-rho and --adadelta-eps."""
    r = config.block_len_dataset
    if r is not None and (config.block_len != "dataset" or isinstance(r, bool)
                          or not isinstance(r, int) or r < 1):
        bad("block_len", f"a resolved dataset block length {r!r} needs --block-len dataset and "
                         "an int >= 1")
    if config.sst_phrases not in SST_PHRASES:
        bad("sst_phrases", f"choose from {SST_PHRASES}, got {config.sst_phrases!r}")
    if config.sst_phrases != "distinct" and config.task not in ("sst1", "sst2"):
        bad("sst_phrases", f"only SST (sst1, sst2) trains on phrases, not {config.task}")
    if config.batching not in BATCHINGS:
        bad("batching", f"choose from {BATCHINGS}, got {config.batching!r}")
    for flag in ("adadelta_rho", "adadelta_eps"):
        if getattr(config, flag) is not None and config.optimizer != "adadelta":
            bad(flag, f"applies to --optimizer adadelta, not {config.optimizer}")
    if config.adadelta_rho is not None and not 0 <= config.adadelta_rho < 1:
        bad("adadelta_rho", f"must be in [0, 1), got {config.adadelta_rho}")
    if config.adadelta_eps is not None and not 0 < config.adadelta_eps < 1:
        bad("adadelta_eps", f"must be in (0, 1), got {config.adadelta_eps}")

"""The paper's baseline encoders (section 4's list), all behind blosa.nn.SentenceEncoder."""
from blosa.nn.baselines.cnn import HrchyCNN, MultiCNN
from blosa.nn.baselines.multi_head import MultiHead
from blosa.nn.baselines.rnn import BiGRU, BiLSTM
from blosa.nn.baselines.sru import BiSRU, SRULayer

__all__ = ["BiGRU", "BiLSTM", "BiSRU", "HrchyCNN", "MultiCNN", "MultiHead", "SRULayer"]

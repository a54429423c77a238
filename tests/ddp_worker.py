"""`blosa train` for test_train_distributed.py, run by torchrun: each process also saves the
parameters it ends training with (before the best checkpoint is loaded back) as
OUT/rank{RANK}.pt, so the test can compare the processes."""
import os
import sys

import torch

from blosa.cli import main
from blosa.train import loop

finish = loop.Trainer.finish


def finish_and_save(self):
    torch.save(self.model.state_dict(), self.dir.path / f"rank{os.environ['RANK']}.pt")
    return finish(self)


loop.Trainer.finish = finish_and_save
sys.exit(main(sys.argv[1:]))

"""`blosa train` for test_train_distributed.py, run by torchrun: each process also saves the
parameters it ends training with (before the best checkpoint is loaded back) as
OUT/rank{RANK}.pt, so the test can compare the processes. With BLOSA_TEST_DIE_AFTER_STEP=S,
rank 0 dies (exit 1) right after it writes the last.pt of step S, as a kill there would leave
the run; torchrun then stops the other process."""
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

die_after = os.environ.get("BLOSA_TEST_DIE_AFTER_STEP")
if die_after is not None:
    save = loop.checkpoint.save_atomic

    def save_then_die(state, path):
        save(state, path)
        if path.name == "last.pt" and state["step"] == int(die_after):
            os._exit(1)

    loop.checkpoint.save_atomic = save_then_die
sys.exit(main(sys.argv[1:]))

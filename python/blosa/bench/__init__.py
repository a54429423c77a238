"""Measuring the paper's efficiency claims (Figure 3, Table 2): time and memory of every encoder.

- cases: an encoder on a random right-padded batch (EncoderCase, build_case)
- steps: the timed steps (inference forward; training forward + backward + Adadelta step)
- procmem: a process's resident-set peak and its memory cap (Linux)
- measure: peak memory then time of one case (measure: CPU cases in a child, CUDA in-process)
- child: the child processes, forked from a server that imported torch once
- memcase: `python -m blosa.bench.memcase` measures one case in its own process
- sweep: a grid of cases into a CSV that a rerun resumes (bench/figures.py draws them)
- snli, table2: the paper's Table 2 on SNLI-shaped data (`python -m blosa.bench.table2`)
- provenance: the machine, commit and date written beside the numbers

This package uses blosa.nn and torch only (not blosa.train, blosa.data or blosa.tasks).
"""
from blosa.bench.cases import LABELS, MODES, PAPER_ENCODERS, EncoderCase, build_case, paper_hidden
from blosa.bench.measure import Measurement, measure, measure_here
from blosa.bench.procmem import OutOfMemory

__all__ = ["LABELS", "MODES", "PAPER_ENCODERS", "EncoderCase", "Measurement", "OutOfMemory",
           "build_case", "measure", "measure_here", "paper_hidden"]

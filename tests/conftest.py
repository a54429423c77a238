import os
import sys

# tests/ helpers (attn_cases.py) importable from every test module.
sys.path.insert(0, os.path.dirname(__file__))

# The Triton tests run in their own pytest process (see the Makefile): the interpreter must be
# switched on before triton is first imported, which this process may already have done.
collect_ignore = ["triton"]

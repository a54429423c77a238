"""Triton kernels of blosa (filled in by the Triton issue)."""

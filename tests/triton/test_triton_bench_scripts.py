"""The Triton side of the GPU check's scripts, run where the kernels run (the interpreter on CPU).

bench/gpu_tools/gpu_check.sh profiles the Triton kernels under Nsight Compute with a fixed launch count
and a kernel-name filter; bench/gpu_tools/ncu_kernels.py --backend triton makes those launches. A launch
added, lost or renamed there would shift what ncu reports without any error, so this checks that
the script launches exactly what the check's ncu line expects.
"""
import re
import sys
from pathlib import Path

import torch

from blosa_kernels import configs
from triton_testing import DEVICE, record_launches

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_tools"
sys.path.insert(0, str(BENCH))

import ncu_kernels  # noqa: E402


def triton_ncu_line() -> re.Match:
    """The NVTX range, kernel-name filter and launch count of gpu_check.sh's Triton ncu run."""
    text = (BENCH / "gpu_check.sh").read_text()
    found = re.search(r"--nvtx-include '([^']*)/' --kernel-name regex:'([^']*)' --launch-count (\d+)",
                      text)
    assert found, "gpu_check.sh has no Triton ncu line"
    return found


def test_ncu_script_launches_what_the_check_profiles(monkeypatch, launches):
    # The GPU's one block of n = 384 is longer than 64 (row tiles); here n = 16 stands in for it,
    # with blocks of up to 8 still small (so r = 8 still takes the per-pair kernels).
    monkeypatch.setattr(configs, "SMALL_BLOCK_MAX", 8)
    monkeypatch.setattr(configs, "BACKWARD", "fused")
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    dep, head, value, grad_out = (torch.randn(2, 16, 5, generator=gen).to(DEVICE) for _ in range(4))
    bias = torch.randn(5, generator=gen).to(DEVICE)

    trimmed = record_launches(monkeypatch, "TRIMMED")
    for call in ncu_kernels.triton_calls(dep, head, value, grad_out, bias):
        call()

    assert launches == [("fwd_pairs", True), ("bwd_pairs", True), ("fwd_rows", None),
                        ("bwd_fused", None), ("bwd_dkv_sums", None), ("fwd_rows", None),
                        ("fwd_rows", None), ("bwd_fused", None), ("bwd_dkv_sums", None)]
    assert [flag for kind, flag in trimmed if kind == "bwd_fused"] == [False, True]
    assert configs.FUSED_STEP == "plain"  # the trimmed step's setting put back
    nvtx_range, name_filter, count = triton_ncu_line().groups()
    assert nvtx_range == ncu_kernels.NVTX_RANGE
    assert int(count) == len(launches)
    # Every launch is a kernel the filter keeps (triton names it after the function).
    assert all(re.search(name_filter, f"{kind}_kernel") for kind, _ in launches)

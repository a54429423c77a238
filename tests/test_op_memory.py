"""The fused op keeps extra memory O(B·n·d): no [n, n, d] score tensor, ever."""
from blosa.memprobe import peak_memory_mib


def test_fused_op_never_holds_an_n_by_n_by_d_buffer():
    # One block of n = 2048 at d = 64: a score tensor of n·n·d float32 takes 1 GiB; inputs,
    # outputs, lse and gradients together take about 10 MiB.
    grown = peak_memory_mib("fused", 1, 2048, 64, 0)
    score_tensor_mib = 2048 * 2048 * 64 * 4 / 2**20
    assert grown < 64, f"peak memory grew by {grown:.0f} MiB (an n*n*d tensor is {score_tensor_mib:.0f} MiB)"


def test_probe_sees_the_reference_score_tensor():
    # The same probe must see the reference's [B, m, r, r, d] tensors, or the test above proves
    # nothing: B=8, n=128, one block, d=64 makes 32 MiB score tensors, several of them.
    assert peak_memory_mib("reference", 8, 128, 64, 0) > 64

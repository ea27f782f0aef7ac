import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The tests' tensors are tiny; on a shared 2-core machine extra intra-op threads only spin-wait."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

import pytest


@pytest.fixture(autouse=True)
def _close_figures():
    """Stage results hold matplotlib figures; close them so that pyplot does not keep dozens open."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")

"""c10d-observer: finds hung collectives in PyTorch distributed jobs."""
from ._version import __version__

"""kernelwright: an agentic kernel engineer that writes, verifies and times custom GPU/CPU kernels."""

__version__ = "0.1.0"

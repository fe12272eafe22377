"""ParallelKernelBench itself: running its reference and a candidate under torchrun with its
timing and checks (``runner``), and reading the times it logs (``logs``)."""

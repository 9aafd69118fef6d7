"""termagent: train and evaluate LLM terminal agents in real Docker sandboxes."""

import os

__version__ = "0.1.0"

# OpenMP threads that spin while they wait collapse when anything else runs on the cores (containers, verifiers,
# another job): `make bench-contention` measured the warmup's step beside a container job at 26.5 trained tokens/s
# with ACTIVE and 197.2 with PASSIVE (205 alone either way; metrics/bench_contention.json). Set before torch loads
# OpenMP; an explicit OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

"""One in-process policy shared by concurrent trials: `shared_policy(policy, concurrency, batched=...)`."""

from __future__ import annotations

import threading
from pathlib import Path


def in_process_policy(base: Path, adapter: Path | None, *, policy: str, engine, concurrency: int, batched: bool,
                      prefix_cache: int):
    """The in-process policy of an eval or sample stage, shared by `concurrency` trials: `policy` openvino, the
    OpenVINO engine on base's IR (it batches concurrent calls by itself; `engine`: EngineConfig); hf, transformers
    (+ BatchingPolicy, per-episode KV caches: `batched`, `prefix_cache`)."""
    from termagent.policy.spec import HFSpec, engine_spec, make_policy

    if policy == "openvino":
        return make_policy(engine_spec(engine, base, adapter, max_batch=max(concurrency, 1)))
    spec = HFSpec(model_dir=base, adapter=adapter, prefix_cache=prefix_cache)
    return shared_policy(make_policy(spec), concurrency, batched=batched)


def shared_policy(policy, concurrency: int, *, batched: bool = False):
    """The in-process policy that `concurrency` trials share: one call at a time (SerializedPolicy), or with
    batched=True their pending calls coalesced into one batch (BatchingPolicy). Batch over a prefix-cached
    backend (`prefix_cache`): over plain `generate` every call re-prefills its whole padded prompt, which
    measured slower than serialising on the 2-core CPU (metrics/bench_batching.json)."""
    if batched and concurrency > 1 and callable(getattr(policy, "generate_ids", None)):
        from termagent.policy.batching import BatchingPolicy

        return BatchingPolicy(policy)
    return SerializedPolicy(policy)


class SerializedPolicy:
    """One in-process model shared by concurrent trials: generate() calls take turns (the CPU has
    no room for two at once, and a transformers model is not meant to be driven from two threads),
    while containers, terminals and verifiers still overlap."""

    def __init__(self, policy):
        self._policy = policy
        self._lock = threading.Lock()

    def generate(self, *args, **kwargs):
        with self._lock:
            return self._policy.generate(*args, **kwargs)

    def count_tokens(self, *args, **kwargs):
        with self._lock:
            return self._policy.count_tokens(*args, **kwargs)

    def __getattr__(self, name):  # name, context_limit, close, ...
        return getattr(self._policy, name)

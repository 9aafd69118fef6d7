"""One in-process model shared by concurrent episodes, with their pending calls coalesced into one batch.

Concurrent trials (eval at `concurrency > 1`, a group of multi-turn RL rollouts) each drive their own
episode loop on their own thread. Serialising their `generate` calls (one at a time) leaves the model
working on batches of one while the others wait; on a CPU a decoding step of a small model costs about
the same for one row as for eight, so that wastes most of the machine. `BatchingPolicy` queues every
call and a single worker thread runs the pending ones as one batch. Over a backend with per-episode KV
caches (`hf:...,prefix_cache=N`, termagent.policy.kv) each row prefills only its new tokens, alone, and the
batch only decodes together: that is the fast path (metrics/bench_batching.json). Over plain `generate`
every call re-prefills its whole left-padded prompt, which on a CPU was slower than serialising.

    policy = BatchingPolicy(make_policy("hf:models/base"))   # any policy with prompt_ids + generate_ids
    # ... hand `policy` to eight TerminusAgents running on eight threads ...

- Calls coalesce only when they share (max_tokens, temperature, top_p, seed): one `generate` call of the
  backend takes one of each. Unseeded calls (the default) always share; seeded ones share with calls of
  the same seed (eval attempts of one index), and then the sample depends on the batch's make-up.
- A batch never exceeds `max_batch` rows (the backend's own, by default); a call bigger than that runs
  alone and the backend splits it. Its prompts are of similar length (`min_fill`, `max_batch_tokens`):
  padding a short prompt to a long one costs more than batching saves.
- When the model is idle, the oldest call waits until `gather_s` after its arrival for company (calls that arrive while a
  batch runs simply join the next one). Greedy rows are the same tokens as alone (tested).
- Tokenising (`count_tokens`, `prompt_ids`) happens on the caller's thread under a lock of its own, so
  the context manager's counting never waits behind a generation.
- `generate_ids` (token-in/token-out, for multi-turn RL) is batched the same way.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

from termagent.policy.base import Generation, Policy, PolicyError, TokenPolicy


@dataclass
class _Call:
    prompts: list[list[int]]
    key: tuple  # (max_tokens, temperature, top_p, seed)
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Generation] | None = None
    error: BaseException | None = None
    arrived: float = field(default_factory=time.monotonic)
    rows: list = field(default_factory=list)  # continuous mode: its rows of the running batch


class BatchingPolicy(TokenPolicy):
    def __init__(self, policy: Policy, *, max_batch: int | None = None, gather_s: float = 0.05,
                 min_fill: float = 0.8, max_batch_tokens: int = 32768):
        for needed in ("prompt_ids", "generate_ids"):
            if not callable(getattr(policy, needed, None)):
                raise PolicyError(f"BatchingPolicy: {type(policy).__name__} has no {needed}() (token ids are "
                                  "needed to batch in-process; servers such as vLLM batch by themselves)")
        self.policy = policy
        self.name = policy.name
        self.context_limit = policy.context_limit
        self.max_batch = int(max_batch or getattr(policy, "max_batch", 8))
        self.gather_s = float(gather_s)
        # Left padding makes every row of a batch as long as its longest, and prefill attention grows with the
        # square of that length: a 12k-token prompt batched with seven 1.5k ones took 117 s against 18 s one
        # by one (tiny model, CPU). So a batch only takes prompts at least `min_fill` of its longest, and at
        # most `max_batch_tokens` padded tokens; the others wait for the next batch (the oldest call always
        # leads, so none starves).
        self.min_fill = float(min_fill)
        self.max_batch_tokens = int(max_batch_tokens)
        if getattr(policy, "unpadded", False):
            # A backend that pads no prompt (HFPolicy over per-episode KV caches prefills each row alone; a vLLM
            # engine pads nothing): rows of any length batch well.
            self.min_fill, self.max_batch_tokens = 0.0, 1 << 62
        self._queue: collections.deque[_Call] = collections.deque()
        self._cond = threading.Condition()
        self._tokenizer_lock = threading.Lock()
        self._closed = False
        self._worker: threading.Thread | None = None
        # batches run, rows generated, the biggest batch: how much coalescing happened
        self.stats: collections.Counter = collections.Counter()

    # -- tokens (caller's thread) -------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict]) -> list[int]:
        with self._tokenizer_lock:
            return self.policy.prompt_ids(messages)

    @property
    def tokenizer(self):
        return self.policy.tokenizer

    # -- generation -----------------------------------------------------------------------------------
    def generate_ids(self, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                     seed: int | None = None, top_p: float = 1.0) -> list[Generation]:
        if not prompts:
            return []
        call = _Call([list(p) for p in prompts], (int(max_tokens), float(temperature), float(top_p), seed))
        with self._cond:
            if self._closed:
                raise PolicyError("BatchingPolicy: generate after close()")
            self._queue.append(call)
            if self._worker is None:
                self._worker = threading.Thread(target=self._serve, name="batching-policy", daemon=True)
                self._worker.start()
            self._cond.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _serve(self) -> None:
        if getattr(self.policy, "decoder", None) is not None:
            return self._serve_continuous()
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return  # closed and drained
                self._gather()
                batch = self._take_batch()
            self._run(batch)

    def _gather(self) -> None:
        """The model is idle: give concurrent episodes a moment (from the oldest call's arrival) to join."""
        deadline = self._queue[0].arrived + self.gather_s
        while not self._closed and self._pending_rows() < self.max_batch:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._cond.wait(left)

    def _serve_continuous(self) -> None:
        """Continuous batching over the prefix-cached decoder: a call arriving while others decode joins the
        running batch at the next token (prefilled alone from its episode's cache) instead of waiting for the
        batch to end; a row that ends leaves it at once. Unseeded calls with one (temperature, top_p) share the
        batch, each with its own max_tokens; a seeded call runs as a batch of its own when the model is idle
        (its sample then depends on nothing else)."""
        from termagent.policy.kv import DecodeBatch

        decoder = self.policy.decoder
        batch, sampling = DecodeBatch(), None
        while True:
            with self._cond:
                while not self._queue and not batch.rows and not self._closed:
                    self._cond.wait()
                if not self._queue and not batch.rows:
                    return  # closed and drained
                joining: list[_Call] = []
                alone = None
                if not batch.rows and self._queue:
                    self._gather()
                    if self._queue[0].key[3] is not None:  # seeded: alone, reproducible
                        alone = self._queue.popleft()
                    else:
                        sampling = self._queue[0].key[1:3]
                        self.stats.update(batches=1)
                if alone is None:
                    room = self.max_batch - len(batch.rows)
                    keep: collections.deque[_Call] = collections.deque()
                    for call in self._queue:
                        if call.key[3] is None and call.key[1:3] == sampling and len(call.prompts) <= room:
                            joining.append(call)
                            room -= len(call.prompts)
                        else:
                            keep.append(call)
                    self._queue = keep
            if alone is not None:
                self._run([alone])
                continue
            for call in joining:
                try:
                    call.rows = decoder.join(batch, call.prompts, call.key[0], tag=call)
                except BaseException as error:  # noqa: BLE001 (this caller's prompt; the batch goes on)
                    call.error = error
                    call.done.set()
                    continue
                self.stats.update(rows=len(call.prompts), joined_running=len(call.prompts) * (
                    len(batch.rows) > len(call.prompts)))
            self.stats["max_rows"] = max(self.stats["max_rows"], len(batch.rows))
            try:
                finished = decoder.step(batch, sampling[0], sampling[1])
            except BaseException as error:  # noqa: BLE001 (handed to every caller in the batch)
                for call in {id(r.tag): r.tag for r in batch.rows}.values():
                    call.error = error
                    call.done.set()
                batch.reset()
                continue
            for row in finished:
                call = row.tag
                self.stats.update(completion_tokens=len(row.ids))
                if all(r.ids and (r.stopped or len(r.ids) >= r.max_tokens) for r in call.rows):
                    call.result = [self.policy.to_generation(r.prompt, r.decoded()) for r in call.rows]
                    call.done.set()

    def _pending_rows(self) -> int:
        key = self._queue[0].key
        return sum(len(c.prompts) for c in self._queue if c.key == key)

    def _take_batch(self) -> list[_Call]:
        """The oldest call plus the later ones with its key, in arrival order, within max_batch rows."""
        first = self._queue.popleft()
        batch, rows, keep = [first], len(first.prompts), collections.deque()
        lengths = [len(p) for p in first.prompts]
        while self._queue:
            call = self._queue.popleft()
            joined = lengths + [len(p) for p in call.prompts]
            width = max(joined)
            if (call.key == first.key and rows + len(call.prompts) <= self.max_batch
                    and min(joined) >= self.min_fill * width and len(joined) * width <= self.max_batch_tokens):
                batch.append(call)
                rows += len(call.prompts)
                lengths = joined
            else:
                keep.append(call)
        self._queue = keep
        return batch

    def _run(self, batch: list[_Call]) -> None:
        max_tokens, temperature, top_p, seed = batch[0].key
        prompts = [p for call in batch for p in call.prompts]
        try:
            generations = self.policy.generate_ids(prompts, max_tokens=max_tokens, temperature=temperature,
                                                   seed=seed, top_p=top_p)
        except BaseException as error:  # noqa: BLE001 (handed to every caller of the batch)
            for call in batch:
                call.error = error
                call.done.set()
            return
        self.stats.update(batches=1, rows=len(prompts), completion_tokens=sum(g.completion_tokens for g in generations))
        self.stats["max_rows"] = max(self.stats["max_rows"], len(prompts))
        start = 0
        for call in batch:
            call.result = generations[start : start + len(call.prompts)]
            start += len(call.prompts)
            call.done.set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join()
        self.policy.close()

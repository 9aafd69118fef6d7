"""Batched decoding over per-episode KV caches: what makes in-process generation of concurrent episodes
cheap on a CPU.

`model.generate` on a left-padded batch re-prefills every prompt on every call. An agent's prompt is the
whole conversation so far (thousands of tokens), and turn t+1's prompt starts with turn t's prompt and
reply, so nearly all of that prefill recomputes keys and values the previous call already had; padding the
rows to the longest one then runs the prefill with an explicit mask, off the fast causal path
(metrics/bench_batching.json measured batching *slower* than one call at a time for that reason).

`CachedDecoder` keeps the keys and values of recent sequences (an LRU of `max_entries` rows, keyed by their
token ids) and, per call:

1. prefills each row alone (no padding, the causal path) from the longest cached prefix of its prompt:
   only the new tokens (the last observation and the chat template's glue) are computed;
2. stacks the rows' caches, left-padded to the longest, and decodes them together, one token per row per
   forward, with the padding masked out and each row at its own positions;
3. drops a row from the batch as soon as it ends (end-of-sequence or max_tokens) and stores its cache
   (prompt + reply) for the episode's next call.

Sampling is `generate`'s: logits / temperature, then top-k, then top-p, then a multinomial draw from
torch's global RNG (the caller seeds it); greedy at temperature 0. Logprobs are log softmax(raw logits /
temperature) of the chosen tokens, as `HFPolicy` reports them. Greedy rows equal `generate`'s (tested).

The cache is only valid for fixed weights: a policy whose weights change (an RL trainer's model) must
`clear()` it after every update, or not use it.

The running batch's keys and values live in buffers with room to grow (`GrowingLayer`): a decode step writes
its token in place, where transformers' `DynamicLayer` would `torch.cat` every row's whole cache once per token
per layer. The logits are bit-identical; a decode step is 1.2–1.6x faster at 500–4,000 cached tokens
(`scripts/bench_kv_cache.py`, metrics/bench_kv_cache.json).
"""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass, field

import torch


@dataclass
class Decoded:
    ids: list[int]  # completion ids, the end-of-sequence token included when there is one
    logprobs: list[float]
    stopped: bool  # ended at an end-of-sequence token (else at max_tokens)
    cached_prefix: int  # prompt tokens whose keys/values came from the cache (not recomputed)


@dataclass
class Row:
    """One sequence of a running batch."""
    prompt: list[int]
    max_tokens: int
    length: int  # tokens in its cache: the prompt and the reply tokens fed so far
    cached_prefix: int
    tag: object = None  # the caller's (BatchingPolicy: its call)
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stopped: bool = False

    def decoded(self) -> Decoded:
        return Decoded(ids=self.ids, logprobs=self.logprobs, stopped=self.stopped, cached_prefix=self.cached_prefix)


@functools.cache
def _growing_layer_class():
    """The layer class, built on first use (transformers is imported lazily here, as everywhere in the module)."""
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A `DynamicLayer` whose keys/values are views of buffers with spare positions: `update` writes the new
        states in place and grows the buffers by half when full (amortised O(1) per token), instead of
        re-allocating and copying the whole cache on every token. Only `update` keeps the buffers in step:
        nothing here calls the layer's crop/reorder methods (they would replace the views)."""

        def __init__(self, spare: int):
            super().__init__()
            self.spare = max(1, int(spare))
            self.length = 0

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
            n = self.length + key_states.shape[-2]
            if not self.is_initialized or n > self._keys.shape[-2]:
                capacity = max(n + self.spare, n * 3 // 2) if self.is_initialized else n + self.spare
                shape = (*key_states.shape[:2], capacity, key_states.shape[-1])
                keys, values = key_states.new_empty(shape), value_states.new_empty(shape)
                if self.is_initialized:
                    keys[:, :, : self.length] = self._keys[:, :, : self.length]
                    values[:, :, : self.length] = self._values[:, :, : self.length]
                self._keys, self._values = keys, values
                self.device, self.is_initialized = key_states.device, True
            self._keys[:, :, self.length : n] = key_states
            self._values[:, :, self.length : n] = value_states
            self.length = n
            self.keys, self.values = self._keys[:, :, :n], self._values[:, :, :n]
            return self.keys, self.values

    return GrowingLayer


def growing_cache(layers: list[tuple[torch.Tensor, torch.Tensor]], spare: int):
    """A `DynamicCache` holding `layers` (per-layer keys, values) in `GrowingLayer`s with `spare` free positions."""
    from transformers import DynamicCache

    layer_class = _growing_layer_class()
    cache = DynamicCache()  # no layers yet: they are appended below
    for k, v in layers:
        layer = layer_class(spare)
        layer.update(k, v)
        cache.layers.append(layer)
    return cache


class DecodeBatch:
    """The rows decoding together: their caches left-padded to `width`, the padding masked out, and the
    logits of each row's next token."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.rows: list[Row] = []
        self.cache = None
        self.mask: torch.Tensor | None = None
        self.logits: torch.Tensor | None = None
        self.width = 0


class CachedDecoder:
    def __init__(self, model, *, eos_ids: list[int], max_entries: int = 16, top_k: int = 0):
        self.model = model
        self.eos_ids = set(eos_ids)
        self.max_entries = int(max_entries)
        self.top_k = int(top_k)
        # token ids (tuple) -> per-layer (keys, values), each [1, kv_heads, len(ids), head_dim]
        self._entries: collections.OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = \
            collections.OrderedDict()
        self.stats: collections.Counter = collections.Counter()

    def clear(self) -> None:
        self._entries.clear()

    # -- cache lookup -----------------------------------------------------------------------------
    def _take_prefix(self, prompt: list[int]) -> tuple[int, list | None]:
        """The cached entry sharing the longest prefix with `prompt` (removed from the cache: its row goes
        on to grow), cut to that prefix; at least one prompt token is left to feed, for its logits."""
        best, best_len = None, 0
        for ids in self._entries:
            n = 0
            for a, b in zip(ids, prompt):
                if a != b:
                    break
                n += 1
            if n > best_len:
                best, best_len = ids, n
        if best is None:
            return 0, None
        layers = self._entries.pop(best)
        keep = min(best_len, len(prompt) - 1)
        if keep <= 0:
            return 0, None
        return keep, [(k[:, :, :keep], v[:, :, :keep]) for k, v in layers]

    def _store(self, ids: list[int], layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        if self.max_entries <= 0:
            return
        self._entries[tuple(ids)] = layers
        self._entries.move_to_end(tuple(ids))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    # -- sampling ---------------------------------------------------------------------------------
    def _sample(self, logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens, their logprobs) for a (rows, vocab) block of raw logits."""
        logits = logits.float()
        if temperature <= 0:
            tokens = logits.argmax(-1)
            logprobs = torch.log_softmax(logits, -1).gather(-1, tokens[:, None]).squeeze(-1)
            return tokens, logprobs
        scaled = logits / temperature
        logprobs_all = torch.log_softmax(scaled, -1)
        filtered = scaled
        if self.top_k > 0:
            kth = torch.topk(filtered, min(self.top_k, filtered.shape[-1]), dim=-1).values[:, -1:]
            filtered = filtered.masked_fill(filtered < kth, float("-inf"))
        if top_p < 1.0:
            # generate's TopPLogitsWarper: drop the tail whose cumulative mass is <= 1 - top_p
            sorted_logits, order = torch.sort(filtered, descending=False, dim=-1)
            cumulative = sorted_logits.softmax(-1).cumsum(-1)
            remove_sorted = cumulative <= (1 - top_p)
            remove_sorted[:, -1] = False
            remove = remove_sorted.scatter(1, order, remove_sorted)
            filtered = filtered.masked_fill(remove, float("-inf"))
        tokens = torch.multinomial(filtered.softmax(-1), 1).squeeze(-1)
        return tokens, logprobs_all.gather(-1, tokens[:, None]).squeeze(-1)

    # -- generation -------------------------------------------------------------------------------
    @torch.no_grad()
    def _prefill(self, prompt: list[int]) -> tuple[torch.Tensor, list, int]:
        """Last-position logits and the row's per-layer cache after the whole prompt."""
        from transformers import DynamicCache

        device = next(self.model.parameters()).device
        start, layers = self._take_prefix(prompt)
        cache = DynamicCache(ddp_cache_data=layers) if layers else DynamicCache()
        new = torch.tensor([prompt[start:]], device=device)
        positions = torch.arange(start, len(prompt), device=device)[None]
        out = self.model(input_ids=new, position_ids=positions, cache=cache, use_cache=True)
        self.stats.update(prefill_tokens=len(prompt) - start, cached_tokens=start)
        return out.logits[0, -1], [(k, v) for k, v, *_ in cache], start

    # -- a running batch that rows join and leave (continuous batching) ----------------------------
    @torch.no_grad()
    def join(self, batch: DecodeBatch, prompts: list[list[int]], max_tokens: int, tag=None) -> list[Row]:
        """Prefill `prompts` (each alone, from its longest cached prefix) and add them to `batch`; they
        take part from the next `step`. Returns their rows."""
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        device = next(self.model.parameters()).device
        joined = []
        for prompt in prompts:
            logits, layers, cached = self._prefill(prompt)
            row = Row(prompt=list(prompt), max_tokens=int(max_tokens), length=len(prompt), cached_prefix=cached,
                      tag=tag)
            old = [(k, v) for k, v, *_ in batch.cache] if batch.rows else []
            width = max(batch.width, row.length)
            grow = width - batch.width  # the running rows get more left padding when a longer row joins
            pad = width - row.length
            merged = []
            for i, (k, v) in enumerate(layers):
                k, v = (torch.nn.functional.pad(t, (0, 0, pad, 0)) for t in (k, v))
                if old:
                    ok, ov = (torch.nn.functional.pad(t, (0, 0, grow, 0)) for t in old[i])
                    k, v = torch.cat([ok, k]), torch.cat([ov, v])
                merged.append((k, v))
            batch.cache = growing_cache(merged, spare=max(r.max_tokens - len(r.ids) for r in [*batch.rows, row]))
            row_mask = torch.tensor([[0] * pad + [1] * row.length], device=device)
            if batch.rows:
                old_mask = torch.nn.functional.pad(batch.mask, (grow, 0))
                batch.mask = torch.cat([old_mask, row_mask])
                batch.logits = torch.cat([batch.logits, logits[None]])
            else:
                batch.mask, batch.logits = row_mask, logits[None]
            batch.width = width
            batch.rows.append(row)
            joined.append(row)
        return joined

    @torch.no_grad()
    def step(self, batch: DecodeBatch, temperature: float, top_p: float = 1.0) -> list[Row]:
        """Sample one token for every row; rows that end leave the batch (their caches are stored) and are
        returned; the others are fed their token (one forward for all of them)."""
        if not batch.rows:
            return []
        device = batch.mask.device
        tokens, logprobs = self._sample(batch.logits, temperature, top_p)
        finished = []
        for b, row in enumerate(batch.rows):
            t = int(tokens[b])
            row.ids.append(t)
            row.logprobs.append(float(logprobs[b]))
            if t in self.eos_ids or len(row.ids) >= row.max_tokens:
                row.stopped = t in self.eos_ids
                finished.append(b)
        if finished:
            layers = [(k, v) for k, v, *_ in batch.cache]
            for b in finished:  # the row's cache: its prompt and every reply token fed so far (right-aligned)
                row, n = batch.rows[b], batch.rows[b].length
                self._store(row.prompt + row.ids[:-1],
                            [(k[b : b + 1, :, -n:].clone(), v[b : b + 1, :, -n:].clone()) for k, v in layers])
            keep = [b for b in range(len(batch.rows)) if b not in finished]
            done = [batch.rows[b] for b in finished]
            batch.rows = [batch.rows[b] for b in keep]
            if not batch.rows:
                batch.reset()
                return done
            index = torch.tensor(keep, device=device)
            # drop the columns every remaining row pads
            first = int((batch.mask.index_select(0, index).sum(0) > 0).nonzero()[0])
            batch.cache = growing_cache([(k.index_select(0, index)[:, :, first:], v.index_select(0, index)[:, :, first:])
                                         for k, v in layers], spare=max(r.max_tokens - len(r.ids) for r in batch.rows))
            batch.mask = batch.mask.index_select(0, index)[:, first:]
            batch.width -= first
            tokens = tokens.index_select(0, index)
        else:
            done = []
        batch.mask = torch.cat([batch.mask, torch.ones((len(batch.rows), 1), dtype=batch.mask.dtype,
                                                       device=device)], dim=1)
        positions = torch.tensor([[row.length] for row in batch.rows], device=device)
        out = self.model(input_ids=tokens[:, None], attention_mask=batch.mask, position_ids=positions,
                         cache=batch.cache, use_cache=True)
        batch.logits = out.logits[:, -1]
        batch.width += 1
        for row in batch.rows:
            row.length += 1
        self.stats.update(decode_steps=1, decode_rows=len(batch.rows))
        return done

    def generate(self, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                 top_p: float = 1.0) -> list[Decoded]:
        """Complete `prompts` as one batch (no other rows join)."""
        batch = DecodeBatch()
        rows = self.join(batch, prompts, max_tokens)
        while batch.rows:
            self.step(batch, temperature, top_p)
        return [row.decoded() for row in rows]

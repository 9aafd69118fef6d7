"""CachedDecoder (HFPolicy prefix_cache): the same tokens as `generate`, with the keys/values reused."""

from __future__ import annotations

import threading

import pytest
import torch

from termagent.policy import make_policy
from termagent.policy.batching import BatchingPolicy

FIRST = [{"role": "user", "content": "Count the lines of every .log file under /var/log and sort them by size."}]
SHORT = [{"role": "user", "content": "List the files in /app."}]
MIDDLE = [{"role": "user", "content": "Make the script `/app/delta/nimbus_61.sh` executable, then run it."}]


@pytest.fixture(scope="module")
def plain(tiny_model_dir):
    return make_policy(f"hf:{tiny_model_dir}")


@pytest.fixture()
def cached(tiny_model_dir):
    return make_policy(f"hf:{tiny_model_dir},prefix_cache=8")


def _same(a, b):
    assert a.prompt_ids == b.prompt_ids
    assert a.completion_ids == b.completion_ids
    assert a.finish_reason == b.finish_reason and a.text == b.text
    assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_a_batch_of_different_lengths_decodes_the_greedy_tokens_of_generate(plain, cached):
    batch = [FIRST, SHORT, MIDDLE]
    for want, got in zip(plain.generate(batch, max_tokens=12, temperature=0.0),
                         cached.generate(batch, max_tokens=12, temperature=0.0)):
        _same(want, got)
    assert cached._decoder.stats["cached_tokens"] == 0  # nothing was cached before


def test_the_next_turn_reuses_the_cached_prefix_and_keeps_its_tokens(plain, cached):
    [first] = cached.generate([FIRST], max_tokens=10, temperature=0.0)
    second_turn = FIRST + [{"role": "assistant", "content": first.text},
                           {"role": "user", "content": "New Terminal Output:\nroot@sandbox:/app# "}]
    prompt = cached.prompt_ids(second_turn)
    assert prompt[: len(first.prompt_ids)] == first.prompt_ids  # the conversation grows at its end
    [got] = cached.generate([second_turn], max_tokens=10, temperature=0.0)
    _same(plain.generate([second_turn], max_tokens=10, temperature=0.0)[0], got)
    stats = cached._decoder.stats
    # at least the whole first prompt came from the cache; only the new tokens were prefilled
    assert stats["cached_tokens"] >= len(first.prompt_ids)
    assert stats["prefill_tokens"] == len(first.prompt_ids) + len(prompt) - stats["cached_tokens"]


def test_rows_that_end_early_leave_the_batch_and_the_others_keep_their_tokens(tiny_model_dir, plain):
    cached = make_policy(f"hf:{tiny_model_dir},prefix_cache=8")
    greedy = plain.generate([SHORT, MIDDLE], max_tokens=8, temperature=0.0)
    # the third token SHORT's reply writes becomes an end-of-sequence token: that row stops there
    eos = greedy[0].completion_ids[2]
    plain_eos = make_policy(f"hf:{tiny_model_dir}")
    plain_eos.eos_ids = cached.eos_ids = [eos]
    want = plain_eos.generate([SHORT, MIDDLE], max_tokens=8, temperature=0.0)
    got = cached.generate([SHORT, MIDDLE], max_tokens=8, temperature=0.0)
    assert got[0].finish_reason == "stop" and got[0].completion_tokens <= 3
    for w, g in zip(want, got):
        _same(w, g)


def test_sampled_tokens_carry_the_logprobs_a_forward_pass_gives_and_the_seed_repeats_them(cached):
    a = cached.generate([FIRST, SHORT], max_tokens=8, temperature=1.0, seed=3)
    b = cached.generate([FIRST, SHORT], max_tokens=8, temperature=1.0, seed=3)
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    for gen in a:
        ids = torch.tensor([gen.prompt_ids + gen.completion_ids])
        with torch.no_grad():
            logits = cached.model(ids).logits[0, len(gen.prompt_ids) - 1 : -1]
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(gen.completion_ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)


def test_concurrent_episodes_batch_over_the_cache_with_serial_greedy_tokens(plain, cached):
    conversations = [FIRST, SHORT, MIDDLE]
    serial = [plain.generate([m], max_tokens=10, temperature=0.0)[0] for m in conversations]
    batching = BatchingPolicy(cached, max_batch=3, gather_s=30.0)  # lengths differ: the cache lifts min_fill
    results = [None] * 3
    barrier = threading.Barrier(3)

    def work(i):
        barrier.wait()
        results[i] = batching.generate([conversations[i]], max_tokens=10, temperature=0.0)[0]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert batching.stats["batches"] == 1 and batching.stats["max_rows"] == 3
    for want, got in zip(serial, results):
        _same(want, got)


def test_a_call_arriving_while_a_batch_decodes_joins_it_and_keeps_its_greedy_tokens(plain, cached):
    batching = BatchingPolicy(cached, max_batch=4, gather_s=0.0)
    long_reply = threading.Thread(target=lambda: results.__setitem__(0, batching.generate(
        [FIRST], max_tokens=48, temperature=0.0)[0]))
    results = [None, None]
    long_reply.start()
    results[1] = batching.generate([MIDDLE], max_tokens=12, temperature=0.0)[0]  # usually joins mid-batch
    long_reply.join()
    assert batching.stats["rows"] == 2
    _same(plain.generate([FIRST], max_tokens=48, temperature=0.0)[0], results[0])
    _same(plain.generate([MIDDLE], max_tokens=12, temperature=0.0)[0], results[1])


def test_seeded_calls_are_reproducible_through_the_continuous_batcher(cached):
    batching = BatchingPolicy(cached, max_batch=4, gather_s=0.0)
    a = batching.generate([SHORT], max_tokens=8, temperature=1.0, seed=5)[0]
    b = batching.generate([SHORT], max_tokens=8, temperature=1.0, seed=5)[0]
    assert a.completion_ids == b.completion_ids


def test_growing_cache_decodes_bit_identical_logits_to_dynamic_cache_and_grows_in_place(tiny_model_dir):
    from transformers import AutoModelForCausalLM, DynamicCache

    from termagent.policy.kv import growing_cache

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    torch.manual_seed(0)
    ids, mask = torch.randint(0, 200, (3, 40)), torch.ones(3, 40, dtype=torch.long)
    mask[1, :7] = 0  # a left-padded row, as in a running batch
    with torch.no_grad():
        plain = DynamicCache()
        first = model(input_ids=ids, attention_mask=mask, cache=plain, use_cache=True).logits[:, -1]
        grown = growing_cache([(k.clone(), v.clone()) for k, v, *_ in plain], spare=3)
        buffers = [layer._keys for layer in grown.layers]
        tokens = first.argmax(-1)
        for step in range(8):  # spare 3: the buffers grow during the loop
            mask = torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], 1)
            positions = torch.full((3, 1), 40 + step) - torch.tensor([[0], [7], [0]])
            kwargs = {"input_ids": tokens[:, None], "attention_mask": mask, "position_ids": positions, "use_cache": True}
            want = model(**kwargs, cache=plain).logits[:, -1]
            got = model(**kwargs, cache=grown).logits[:, -1]
            assert torch.equal(want, got), f"step {step}: logits differ"
            tokens = want.argmax(-1)
        for layer, (k, v, *_) in zip(grown.layers, plain):
            assert torch.equal(layer.keys, k) and torch.equal(layer.values, v)
            assert layer.keys.shape[-2] == 48
        assert grown.get_seq_length() == plain.get_seq_length() == 48
        assert all(layer._keys is not before for layer, before in zip(grown.layers, buffers))  # regrown
        assert all(layer._keys.shape[-2] > 48 for layer in grown.layers)  # with room to spare


def test_the_running_batch_writes_each_token_into_its_growing_cache_in_place(cached):
    # CachedDecoder's batch (join, and the rebuild when a row leaves) runs over GrowingLayers, and a decode step
    # with no join or leave keeps every layer's buffer where it was: no per-token copy of the cache.
    from termagent.policy.kv import DecodeBatch, _growing_layer_class

    decoder, layer_class = cached._decoder, _growing_layer_class()
    batch = DecodeBatch()
    decoder.join(batch, [list(range(10, 40))], max_tokens=2)
    decoder.join(batch, [list(range(50, 70))], max_tokens=8)
    assert all(isinstance(layer, layer_class) for layer in batch.cache.layers)
    while len(batch.rows) == 2:  # the first row leaves after its 2 tokens (or at an end-of-sequence token)
        decoder.step(batch, temperature=0.0)
    assert len(batch.rows) == 1 and all(isinstance(layer, layer_class) for layer in batch.cache.layers)
    buffers = [layer._keys.data_ptr() for layer in batch.cache.layers]
    length = batch.cache.get_seq_length()
    decoder.step(batch, temperature=0.0)
    assert batch.rows and batch.cache.get_seq_length() == length + 1  # the second row (8 tokens) still decodes
    assert [layer._keys.data_ptr() for layer in batch.cache.layers] == buffers

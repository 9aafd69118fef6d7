"""BatchingPolicy: concurrent calls coalesce into one batched forward and greedy rows keep their tokens."""

from __future__ import annotations

import threading

import pytest

from termagent.policy import PolicyError, make_policy
from termagent.policy.batching import BatchingPolicy

CONVERSATIONS = [
    [{"role": "user", "content": "List the files in /app."}],
    [{"role": "user", "content": "Count the lines of every .log file under /var/log and sort them by size."}],
    [{"role": "user", "content": "Fix the permissions."},
     {"role": "assistant", "content": '{"analysis": "", "plan": "", "commands": [], "task_complete": false}'},
     {"role": "user", "content": "New Terminal Output:\nroot@sandbox:/app# "}],
    [{"role": "user", "content": "Print the kernel version"}],
]


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return make_policy(f"hf:{tiny_model_dir}")


def _concurrently(fn, n):
    results, errors = [None] * n, []
    barrier = threading.Barrier(n)

    def work(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_batched_greedy_generation_equals_serial_greedy_generation(hf):
    serial = [hf.generate([m], max_tokens=24, temperature=0.0)[0] for m in CONVERSATIONS]
    # A long gather window and max_batch = the number of callers: the four calls form one batch
    # (min_fill 0: whatever their lengths, so that left padding is exercised).
    batching = BatchingPolicy(hf, max_batch=len(CONVERSATIONS), gather_s=30.0, min_fill=0.0)
    batched = _concurrently(lambda i: batching.generate([CONVERSATIONS[i]], max_tokens=24, temperature=0.0)[0],
                            len(CONVERSATIONS))
    assert batching.stats["batches"] == 1 and batching.stats["max_rows"] == len(CONVERSATIONS)
    for alone, together in zip(serial, batched):
        assert together.prompt_ids == alone.prompt_ids
        assert together.completion_ids == alone.completion_ids
        assert together.finish_reason == alone.finish_reason and together.text == alone.text
        assert together.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_token_in_token_out_calls_batch_and_keep_the_prompt_ids(hf):
    batching = BatchingPolicy(hf, max_batch=2, gather_s=30.0, min_fill=0.0)
    prompts = [hf.prompt_ids(CONVERSATIONS[0]), hf.prompt_ids(CONVERSATIONS[2])]
    out = _concurrently(lambda i: batching.generate_ids([prompts[i]], max_tokens=8, temperature=0.0)[0], 2)
    assert batching.stats["max_rows"] == 2
    for prompt, gen in zip(prompts, out):
        assert gen.prompt_ids == prompt
        assert gen.completion_ids == hf.generate_ids([prompt], max_tokens=8, temperature=0.0)[0].completion_ids


def test_calls_with_different_settings_never_share_a_batch(hf):
    batching = BatchingPolicy(hf, max_batch=2, gather_s=0.2)
    budgets = [3, 9]
    out = _concurrently(lambda i: batching.generate([CONVERSATIONS[i]], max_tokens=budgets[i],
                                                    temperature=0.0)[0], 2)
    assert batching.stats["batches"] == 2 and batching.stats["max_rows"] == 1
    assert out[0].completion_tokens <= 3


def test_a_backend_error_reaches_every_caller_of_the_batch(tiny_model_dir):
    batching = BatchingPolicy(make_policy(f"hf:{tiny_model_dir}"), max_batch=2, gather_s=0.0)  # closed below
    with pytest.raises(PolicyError, match="empty prompt"):
        batching.generate_ids([[]], max_tokens=4, temperature=0.0)
    batching.close()
    with pytest.raises(PolicyError, match="after close"):
        batching.generate_ids([[1, 2]], max_tokens=4, temperature=0.0)


def test_a_backend_without_token_ids_is_refused():
    class TextOnly:
        name, context_limit = "text", None

    with pytest.raises(PolicyError, match="has no prompt_ids"):
        BatchingPolicy(TextOnly())


def test_prompts_of_very_different_length_are_not_padded_into_one_batch(hf):
    short = hf.prompt_ids(CONVERSATIONS[0])
    long = hf.prompt_ids([{"role": "user", "content": "word " * 200}])
    assert len(short) < 0.8 * len(long)
    batching = BatchingPolicy(hf, max_batch=3, gather_s=30.0)  # closes once the 3 calls are pending
    prompts = [long, short, long]
    out = _concurrently(lambda i: batching.generate_ids([prompts[i]], max_tokens=4, temperature=0.0)[0], 3)
    assert batching.stats["batches"] == 2 and batching.stats["max_rows"] == 2  # the two long ones together
    assert [g.prompt_ids for g in out] == prompts

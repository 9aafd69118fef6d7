"""The vLLM rollout policy (termagent/policy/trl_vllm.py) on a token vLLM could not score.

vLLM reports such a token's logprob as NaN and TRL 1.16's `extract_logprobs` hands it over as None; the policy
used to crash on it (`float(None)`). Now the token keeps None (null in the episode record), the other tokens
keep their numbers, and the policy counts it; TRL reads None as "no importance-sampling correction" for that
token (ratio 1; see the module doc).

There is no vLLM on a CPU machine, so the engine here is the part of TRL's `VLLMGeneration` the policy calls
(`generate`, `generation_kwargs`, `temperature`, `top_p`) sampling from the real tiny model, its output shaped
as vLLM's RequestOutput and passed through TRL's own `extract_logprobs`."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from termagent.policy import make_policy
from termagent.policy.trl_vllm import TRLvLLMPolicy, sampled_logprob
from termagent.train.tito import ChatSuffix, TokenBufferPolicy

HELLO = [{"role": "user", "content": "List the files in /app."}]


class TinyModelEngine:
    """TRL VLLMGeneration's surface, the tiny model behind it; `nan_at`: completion positions vLLM scores NaN."""

    def __init__(self, hf, nan_at: set[int]):
        self.hf, self.nan_at = hf, nan_at
        self.temperature, self.top_p = 1.0, 1.0
        self.generation_kwargs: dict = {}

    def generate(self, prompts, images, num_generations):
        from trl.generation.vllm_generation import extract_logprobs

        outputs, completions = [], []
        for prompt in prompts:
            [gen] = self.hf.generate_ids([prompt], max_tokens=self.generation_kwargs["max_tokens"],
                                         temperature=1.0, seed=0)
            per_position = [{tok: SimpleNamespace(logprob=math.nan if t in self.nan_at else lp, rank=1)}
                            for t, (tok, lp) in enumerate(zip(gen.completion_ids, gen.logprobs))]
            outputs.append(SimpleNamespace(outputs=[SimpleNamespace(logprobs=per_position)]))
            completions.append(gen.completion_ids)
        logprobs, token_ids = extract_logprobs(outputs)  # TRL's own: NaN -> None
        return [list(p) for p in prompts], completions, logprobs, token_ids


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return make_policy(f"hf:{tiny_model_dir}")


def test_sampled_logprob_reads_none_nan_and_empty_as_unscored():
    assert sampled_logprob([-0.25, -3.0]) == -0.25
    assert sampled_logprob([None, -3.0]) is None
    assert sampled_logprob([math.nan]) is None
    assert sampled_logprob([]) is None and sampled_logprob(None) is None


def test_a_nan_logprob_from_vllm_is_kept_as_none_not_a_crash(hf):
    [reference] = hf.generate_ids([hf.prompt_ids(HELLO)], max_tokens=6, temperature=1.0, seed=0)
    assert len(reference.completion_ids) >= 3
    policy = TRLvLLMPolicy(TinyModelEngine(hf, nan_at={1}), hf, name="t")
    [gen] = policy.generate([HELLO], max_tokens=6, temperature=1.0)
    assert gen.completion_ids == reference.completion_ids
    assert gen.logprobs[1] is None
    assert [lp for i, lp in enumerate(gen.logprobs) if i != 1] == pytest.approx(
        [lp for i, lp in enumerate(reference.logprobs) if i != 1])
    assert policy.unscored_tokens == 1
    # the episode record stays valid JSON: null, never NaN
    record = json.dumps(gen.to_dict())
    assert json.loads(record, parse_constant=lambda c: pytest.fail(f"{c} in the record"))["logprobs"][1] is None


def test_the_trajectory_buffer_carries_the_none_to_trl(hf):
    policy = TRLvLLMPolicy(TinyModelEngine(hf, nan_at={0, 2}), hf, name="t")
    buffer = TokenBufferPolicy(base=policy, suffix=ChatSuffix.from_tokenizer(hf.tokenizer), eos_ids=hf.eos_ids,
                               max_completion_tokens=100)
    [gen] = buffer.generate([HELLO], max_tokens=6, temperature=1.0)
    # what rollout_func hands TRL: None where vLLM gave nothing (TRL: NaN -> importance ratio 1), numbers elsewhere
    assert buffer.logprobs == gen.logprobs and buffer.logprobs[0] is None and buffer.logprobs[2] is None
    assert all(isinstance(lp, float) for i, lp in enumerate(buffer.logprobs) if i not in (0, 2))
    assert policy.unscored_tokens == 2

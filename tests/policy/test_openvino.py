"""The OpenVINO engine (termagent.policy.openvino) on the tiny model's real IR: token-in/token-out against the chat
template, greedy fp32 agreement and logprobs against torch, seeds, concurrent callers batched, adapters (a saved
one fused, a trainer's in-memory one at runtime and fused) against PEFT."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from termagent.policy import HFSpec, OpenVINOSpec, PolicyError, make_policy
from termagent.policy.openvino import EngineConfig, ir_dir_for, lora_scale

MESSAGES = [[{"role": "system", "content": "You are a terminal agent."},
             {"role": "user", "content": f"Count the lines of /tmp/file{i}.txt and write the number to out.txt"}]
            for i in range(4)]


@pytest.fixture(scope="module")
def engine(tiny_openvino_dir, tiny_model_dir):
    policy = make_policy(OpenVINOSpec(ir_dir=tiny_openvino_dir, tokenizer=tiny_model_dir, precision="f32"))
    yield policy
    policy.close()


@pytest.fixture(scope="module")
def torch_fp32(tiny_model_dir):
    policy = make_policy(HFSpec(model_dir=tiny_model_dir, dtype="float32"))
    yield policy
    policy.close()


def test_prompt_ids_are_the_chat_templates(engine, torch_fp32):
    """The engine is fed the ids the project's tokenizer renders: equal to apply_chat_template's."""
    for messages in MESSAGES:
        want = torch_fp32.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        assert engine.prompt_ids(messages) == want["input_ids"]
    assert ir_dir_for(engine.tokenizer.name_or_path) == engine.ir_dir  # the exported model's own tokenizer


def test_greedy_f32_equals_torch_fp32_with_logprobs(engine, torch_fp32):
    prompts = [engine.prompt_ids(m) for m in MESSAGES]
    got = engine.generate_ids(prompts, max_tokens=24, temperature=0.0)
    want = torch_fp32.generate_ids(prompts, max_tokens=24, temperature=0.0)
    for g, w in zip(got, want):
        assert g.prompt_ids == w.prompt_ids
        assert g.completion_ids == w.completion_ids and g.finish_reason == w.finish_reason
        assert g.logprobs == pytest.approx(w.logprobs, abs=2e-3)
        assert g.text == torch_fp32.tokenizer.decode(g.completion_ids, skip_special_tokens=True)


def test_logprobs_only_where_they_are_the_policys(engine, torch_fp32):
    """At temperature 1 the engine's (raw) logprobs are log softmax(logits): equal to torch's on the sampled ids.
    At another temperature raw ones are not the policy's quantity: none are reported."""
    prompt = engine.prompt_ids(MESSAGES[0])
    row = engine.generate_ids([prompt], max_tokens=16, temperature=1.0, seed=3)[0]
    ids = torch.tensor([row.prompt_ids + row.completion_ids])
    with torch.no_grad():
        logits = torch_fp32.model(ids).logits[0, len(prompt) - 1:-1].float()
    want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(row.completion_ids)[:, None]).squeeze(-1)
    assert row.logprobs == pytest.approx(want.tolist(), abs=2e-3)
    assert engine.generate_ids([prompt], max_tokens=4, temperature=0.7, seed=3)[0].logprobs is None


def test_seeded_samples_reproduce_whatever_shares_the_batch(engine):
    prompts = [engine.prompt_ids(m) for m in MESSAGES]
    together = engine.generate_ids(prompts, max_tokens=16, temperature=1.0, seed=11)
    alone = engine.generate_ids(prompts[:1], max_tokens=16, temperature=1.0, seed=11)
    other = engine.generate_ids(prompts[:1], max_tokens=16, temperature=1.0, seed=12)
    assert alone[0].completion_ids == together[0].completion_ids
    assert other[0].completion_ids != alone[0].completion_ids


def test_concurrent_callers_decode_as_one_batch(engine):
    """Eight threads (an eval's trials) call at once: each gets what it would alone, in fewer engine steps than
    the rows' tokens, i.e. rows shared steps."""
    prompts = [engine.prompt_ids(m) for m in MESSAGES] * 2
    alone = [engine.generate_ids([p], max_tokens=12, temperature=0.0)[0].completion_ids for p in prompts]
    before = dict(engine.stats)
    results: list = [None] * len(prompts)
    barrier = threading.Barrier(len(prompts))

    def trial(i):
        barrier.wait()
        results[i] = engine.generate_ids([prompts[i]], max_tokens=12, temperature=0.0)[0].completion_ids

    threads = [threading.Thread(target=trial, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == alone
    steps = engine.stats["steps"] - before["steps"]
    tokens = engine.stats["completion_tokens"] - before["completion_tokens"]
    assert steps < tokens / 2


def test_bad_input_fails_clearly(tiny_model_dir, engine):
    with pytest.raises(PolicyError, match="openvino_model.xml"):
        make_policy(OpenVINOSpec(ir_dir=tiny_model_dir))
    with pytest.raises(PolicyError, match="empty prompt"):
        engine.generate_ids([[]], max_tokens=4, temperature=0.0)
    with pytest.raises(ValueError, match="engine.precision"):
        EngineConfig(precision="int4")


@pytest.fixture(scope="module")
def adapter(tiny_model_dir, tmp_path_factory):
    """A LoRA adapter far from zero (alpha != r, so the scaling matters), saved as PEFT saves it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(model, config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.mul_(3.0)
    out = tmp_path_factory.mktemp("adapter")
    model.save_pretrained(out)
    return out


def _greedy(policy, prompts):
    return policy.generate_ids(prompts, max_tokens=16, temperature=0.0)


def test_adapters_equal_peft(tiny_openvino_dir, tiny_model_dir, adapter):
    """A saved adapter fused at build, and a trainer's in-memory state dict set at runtime and fused: each gives
    PEFT's fp32 tokens; a second state dict replaces the first (the next optimizer step's weights)."""
    from peft import get_peft_model_state_dict

    peft = make_policy(HFSpec(model_dir=tiny_model_dir, adapter=adapter, dtype="float32"))
    prompts = [peft.prompt_ids(m) for m in MESSAGES]
    want = _greedy(peft, prompts)
    scale = lora_scale(json.loads((adapter / "adapter_config.json").read_text()))
    assert scale == 2.0
    fused = make_policy(OpenVINOSpec(ir_dir=tiny_openvino_dir, adapter=adapter, precision="f32"))
    assert sum(g.completion_ids == w.completion_ids for g, w in zip(_greedy(fused, prompts), want)) >= 3
    fused.close()

    state = get_peft_model_state_dict(peft.model)
    for mode in ("runtime", "fuse"):
        live = make_policy(OpenVINOSpec(ir_dir=tiny_openvino_dir, precision="f32", adapter_mode=mode))
        base = _greedy(live, prompts)
        live.set_adapter(state, scale)
        got = _greedy(live, prompts)
        assert [g.completion_ids for g in base] != [w.completion_ids for w in want]
        assert sum(g.completion_ids == w.completion_ids for g, w in zip(got, want)) >= 3, mode
        # relative: a logprob of -7.13 came out 0.006 off in f32 (fused weights rounded apart from PEFT's W + s·BA)
        assert got[0].logprobs[:4] == pytest.approx(want[0].logprobs[:4], rel=2e-3, abs=5e-3)
        # the next step's weights
        with torch.no_grad():
            for name, param in peft.model.named_parameters():
                if "lora_B" in name:
                    param.mul_(1.5)
        live.set_adapter(get_peft_model_state_dict(peft.model), scale)
        want2 = _greedy(peft, prompts)
        got2 = _greedy(live, prompts)
        assert got2[0].logprobs[:4] == pytest.approx(want2[0].logprobs[:4], rel=2e-3, abs=5e-3), mode
        with torch.no_grad():
            for name, param in peft.model.named_parameters():
                if "lora_B" in name:
                    param.div_(1.5)
        live.close()

"""GPU check for a lent H100/H200: this project's training code at the H100 profile's shapes.

A random-init model of the profile's shape (Qwen3-8B: hidden 4096, 36 layers, 32/8 heads, vocab 151,936, untied;
built from a config, no download) is saved with a tokenizer carrying the stock Qwen3 chat template (TRL's
qwen3.jinja, read from the installed trl) turned into the project's template
(termagent.models.templates.install_template). Then, each through the project's own functions, with the settings
of params.yaml + profiles/h100.yaml (only the step counts and GRPO's reply length shortened, said below):

    sft       termagent.train.sft.train_sft: LoRA r=64 on 7 modules, max length 8192, batch 1 x 16, gradient
              checkpointing; Terminus-shaped conversations of 4.6-11k tokens; trained tokens/s and peak memory
    sft_nockpt  the same without gradient checkpointing, when the memory plan says it fits this GPU
    dpo       termagent.train.dpo.train_dpo: one optimizer step on pairs at length 8192, from the SFT adapter
    grpo      termagent.train.grpo: the stage's GRPOConfig (grpo_config) and trainer class (TerminalGRPOTrainer),
              one step: generation on the trainer's vLLM engine (colocate, as profiles/h100.yaml trains: TRL pushes
              the LoRA-merged weights, then generates) when vLLM is installed, else in-process; an offline reward
              (the Terminus parser's format verdict: no Docker there), completions of `grpo_completion` tokens
    mt_grpo   termagent.train.mt_grpo: the stage's GRPOConfig (mt_grpo_config) and MTGRPOTrainer, one optimizer
              step at the profile's batch shape (4 tasks x 8 = 32 trajectories, first prompt 2,048 + trajectory
              8,192 tokens, 8 turns with environment tokens between), micro-batches of 1. With vLLM: generated
              episodes (GeneratedEpisodes: one thread per episode, every call through the token buffer and the
              project's BatchingPolicy into TRLvLLMPolicy, after TRL's weight sync); without: synthetic token rows

The JSON says which ran: `vllm.used` and why, each GRPO part's `generation`, MT-GRPO's `rollouts`.

Each reports seconds, tokens/s and torch's peak memory next to the memory plan's estimate
(termagent/train/memory.py) in metrics/bench_gpu.json, rewritten after every part (a crash keeps the parts done).

    python scripts/gpu_check.py                  # on a CUDA machine (make gpu-check); < 8 minutes on an H200
    python scripts/gpu_check.py --vllm on        # the same, refusing to run without vLLM (--vllm off: without it)
    python scripts/gpu_check.py --cpu-dry-run    # the same calls at toy shapes on CPU (a CI test; no timing value)
    python scripts/gpu_check.py --cpu-dry-run --parts mt_grpo --mt-rollouts generated   # MT-GRPO's generated
                                                 # episodes on the in-process model (the vLLM path's code but vLLM)

Refuses (exit 2) without CUDA unless --cpu-dry-run. Needs torch, transformers, peft, trl, datasets (no dvc: the
trainers' dvclive logging is off here, the numbers come from their log history).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("USE_HUB_KERNELS", "NO")  # never fetch kernels from the Hub (transformers >= 5.25)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The H100 profile's model: Qwen3-8B's shape.
FULL = {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960}
TOY = {"vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 4096}
# Sizes of the check. Settings not named here are the H100 profile's.
FULL_SIZES = {"sft_conversations": 16, "sft_tokens": (4600, 11000), "dpo_pairs": 2, "dpo_len": 8192,
              "grpo_completion": 256, "mt_prompt": 2048, "mt_trajectory": 8192, "mt_turns": 8}
TOY_SIZES = {"sft_conversations": 4, "sft_tokens": (1400, 1900), "dpo_pairs": 2, "dpo_len": 1024,
             "grpo_completion": 16, "mt_prompt": 64, "mt_trajectory": 128, "mt_turns": 3}
TOY_PROFILE = {"sft": {"max_length": 2048, "gradient_accumulation_steps": 2, "lora": {"r": 8, "alpha": 8}},
               "dpo": {"max_length": 1024, "gradient_accumulation_steps": 2},
               "grpo": {"num_generations": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 1,
                        "max_prompt_length": 2048, "lora": {"r": 8, "alpha": 8}},
               "mt_grpo": {"num_generations": 2, "tasks_per_step": 2, "max_prompt_length": 64,
                           "max_completion_length": 128, "max_turn_tokens": 32, "max_turns": 3,  # 3 x 32 fits 128 (checked)
                           "vllm_max_model_length": 192,
                           "lora": {"r": 8, "alpha": 8}}}


# -- the model and its tokenizer ------------------------------------------------------------------------------
def corpus() -> list[str]:
    """Text in the shape the stages train on: the Terminus prompt, JSON replies, shell output."""
    from termagent.protocol.prompt import render_initial_prompt as render_prompt

    texts = []
    rng = random.Random(0)
    words = ["file", "directory", "python", "script", "install", "build", "test", "output", "error", "config", "server", "log", "data"]
    for i in range(200):
        w = rng.sample(words, 4)
        instruction = f"Create /app/{w[0]}_{i}.txt listing every {w[1]} under /srv/{w[2]} and run {w[3]}."
        texts.append(render_prompt(instruction, f"root@box:/app# ls /srv/{w[2]}\n{w[0]} {w[1]} {w[3]}\n"))
        texts.append(json.dumps({"analysis": f"The {w[1]} is empty.", "plan": f"List {w[2]}.",
                                 "commands": [{"keystrokes": f"ls -la /srv/{w[2]} > /app/{w[0]}_{i}.txt\n",
                                               "duration": 0.1}], "task_complete": False}))
    return texts


def stock_qwen3_template() -> str:
    """TRL's copy of the stock Qwen3 chat template (what Qwen3-8B ships), read from the installed package."""
    from importlib.resources import files

    return (files("trl") / "chat_templates" / "qwen3.jinja").read_text()


def build_base(out_dir: Path, shape: dict, dtype, device) -> dict:
    """Random-init Qwen3 of `shape` + a BPE tokenizer with Qwen3's special tokens and the project template made
    from the stock Qwen3 one, saved as a transformers directory (what the base_model stage writes)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from termagent.models.templates import install_template
    from termagent.models.tiny import train_tokenizer

    started = time.perf_counter()
    tokenizer = train_tokenizer(corpus(), vocab_size=2048)
    tokenizer.chat_template = stock_qwen3_template()
    install_template(tokenizer)
    config = Qwen3Config(**shape, tie_word_embeddings=False, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
                         rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    n_params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    del model
    empty_cache()
    return {"n_parameters": n_params, "tokenizer_vocab": len(tokenizer), "build_s": round(time.perf_counter() - started, 1)}


# -- measuring ------------------------------------------------------------------------------------------------
def empty_cache():
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def reset_peak():
    import torch

    empty_cache()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def planned(stage_plan) -> dict:
    return {"plan_total_gib": stage_plan.total_gib, "plan_torch_peak_gib": round(stage_plan.total_gib - stage_plan.reserved_gib, 2),
            "plan_fits": stage_plan.fits}


# -- data -----------------------------------------------------------------------------------------------------
def filler(tokenizer, n_tokens: int, rng: random.Random) -> str:
    """Shell-output-like text of about `n_tokens` tokens."""
    lines, count = [], 0
    while count < n_tokens:
        line = f"-rw-r--r-- 1 root root {rng.randint(10, 99999)} Dec  4 18:{rng.randint(10, 59)} data_{rng.randint(0, 9999)}.log"
        lines.append(line)
        count += len(tokenizer(line + "\n")["input_ids"])
    return "\n".join(lines)


def terminus_reply(i: int) -> str:
    return json.dumps({"analysis": f"Step {i}: the listing shows the logs.", "plan": "Count them, then write the file.",
                       "commands": [{"keystrokes": f"ls /var/log | wc -l > /app/count_{i}.txt\n", "duration": 0.1}],
                       "task_complete": False})


def conversations(tokenizer, n: int, lo: int, hi: int, seed: int = 0) -> list[list[dict]]:
    """Terminus-shaped conversations of lo..hi tokens: prompt, then (reply, observation) turns."""
    from termagent.protocol.prompt import render_initial_prompt as render_prompt

    rng = random.Random(seed)
    out = []
    for c in range(n):
        target = rng.randint(lo, hi)
        turns = 6
        per_obs = max(8, target // (turns + 1))
        conv = [{"role": "user", "content": render_prompt(f"Count the logs (conversation {c}).",
                                                          filler(tokenizer, per_obs, rng))}]
        for t in range(turns):
            conv.append({"role": "assistant", "content": terminus_reply(t)})
            conv.append({"role": "user", "content": "New Terminal Output:\n" + filler(tokenizer, per_obs, rng)})
        conv.append({"role": "assistant", "content": terminus_reply(turns)})
        out.append(conv)
    return out


# -- the parts ------------------------------------------------------------------------------------------------
def run_sft(base: Path, work: Path, profile: dict, sizes: dict, shape, gpu, *, checkpointing: bool) -> dict:
    from termagent.params import section
    from termagent.train import memory
    from termagent.train.common import load_tokenizer
    from termagent.train.sft import SFTParams, train_sft

    sft = section(profile, "sft", SFTParams)  # one step: a warmup would hold the rate at 0
    params = replace(sft, datasets=["<given>"], max_steps=1,
                     trl={**sft.trl, "num_train_epochs": 1.0, "logging_steps": 1, "warmup_steps": 0.0})
    tokenizer = load_tokenizer(base)
    convs = conversations(tokenizer, sizes["sft_conversations"], *sizes["sft_tokens"])
    p = memory.plan("sft", shape, seq_len=params.max_length, micro_batch=params.per_device_train_batch_size,
                    checkpointing=checkpointing, lora_r=params.lora.r, lora_targets=params.lora.target_modules,
                    gpu_bytes=gpu)
    if not p.fits:
        return {"skipped": f"the memory plan says {p.total_gib} GiB > {p.budget_gib} GiB", **planned(p)}
    params = replace(params, gradient_checkpointing=checkpointing)
    out = work / ("sft" if checkpointing else "sft_nockpt")
    reset_peak()
    started = time.perf_counter()
    metrics = train_sft(base, out / "adapter", params, metrics_dir=out / "metrics", conversations=convs)
    wall = time.perf_counter() - started
    return {"conversations": len(convs), "optimizer_steps": metrics["global_steps"],
            "max_length": params.max_length, "batch": [params.per_device_train_batch_size,
                                                       params.gradient_accumulation_steps],
            "gradient_checkpointing": checkpointing, "trained_tokens_per_s": metrics.get("tokens_per_s"),
            "assistant_tokens": metrics.get("assistant_tokens"), "train_loss": metrics.get("train_loss"),
            "wall_s": round(wall, 1), "peak_memory_gib": peak_gib(), **planned(p),
            "adapter": str(out / "adapter")}


def run_dpo(base: Path, sft_adapter: Path, work: Path, profile: dict, sizes: dict, shape, gpu) -> dict:
    from termagent.params import section
    from termagent.train import memory
    from termagent.train.common import load_tokenizer
    from termagent.train.dpo import DPOParams, train_dpo
    from termagent.train.sft import SFTParams

    tokenizer = load_tokenizer(base)
    rng = random.Random(1)
    rows = []
    half = sizes["dpo_len"] // 2
    for i in range(sizes["dpo_pairs"] * 8):
        prompt = [{"role": "user", "content": "Count the logs.\n" + filler(tokenizer, half - 200, rng)}]
        rows.append({"prompt": prompt,
                     "chosen": [{"role": "assistant", "content": terminus_reply(i) + filler(tokenizer, half // 2 - 120, rng)}],
                     "rejected": [{"role": "assistant", "content": "{" + filler(tokenizer, half // 2 - 120, rng)}]})
    data = work / "dpo.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dpo = section(profile, "dpo", DPOParams)
    params = replace(dpo, datasets=[str(data)], trl={**dpo.trl, "max_steps": 1, "logging_steps": 1, "warmup_steps": 0.0})
    sft_lora = section(profile, "sft", SFTParams).lora  # DPO trains the SFT adapter
    p = memory.plan("dpo", shape, seq_len=params.max_length, micro_batch=2 * params.per_device_train_batch_size,
                    checkpointing=True, lora_r=sft_lora.r, lora_targets=sft_lora.target_modules,
                    reference_forward=True, gpu_bytes=gpu)
    reset_peak()
    started = time.perf_counter()
    metrics = train_dpo(base, sft_adapter, work / "dpo" / "adapter", params, metrics_dir=work / "dpo" / "metrics")
    wall = time.perf_counter() - started
    return {"pairs_per_step": params.per_device_train_batch_size * params.gradient_accumulation_steps,
            "max_length": params.max_length, "optimizer_steps": metrics.get("global_steps"),
            "pairs": metrics.get("pairs"), "wall_s": round(wall, 1), "peak_memory_gib": peak_gib(), **planned(p)}


class OfflineEnv:
    """The single-turn environment's interface to TerminalGRPOTrainer without containers: the reward is the
    Terminus parser's strict format verdict (what GRPO's format component scores); script and verifier 0."""

    def __init__(self, tasks: dict[str, str]):
        self.tasks = tasks
        self.last_outcomes = []
        self.last_score_s = 0.0

    def prepare(self, task_ids) -> None:
        pass

    def close(self) -> None:
        pass

    def reward_functions(self) -> list:
        from termagent.protocol.parse import parse_response
        from termagent.train.single_turn import Outcome, _text

        def format_reward(prompts, completions, task_id=None, **_):
            started = time.perf_counter()
            outcomes = []
            for tid, completion in zip(task_id, completions):
                text = _text(completion)
                parsed = parse_response(text)
                ok = parsed.ok and not parsed.fixes
                outcomes.append(Outcome(task_id=tid, completion=text, parse_ok=ok, format_ok=ok, truncated=False,
                                        executed=False, exec_rc=None, script_ok=False, verifier_reward=0.0,
                                        reward=float(ok)))
            self.last_outcomes, self.last_score_s = outcomes, time.perf_counter() - started
            return [o.reward for o in outcomes]

        def zero(name):
            def reward(prompts, completions, **_):
                return [0.0] * len(completions)

            reward.__name__ = name
            return reward

        format_reward.__name__ = "format"
        return [format_reward, zero("script"), zero("verifier")]


def run_grpo(base: Path, work: Path, profile: dict, sizes: dict, shape, gpu, *, use_vllm: bool) -> dict:
    from datasets import Dataset

    from termagent.params import section
    from termagent.protocol.prompt import render_initial_prompt as render_prompt
    from termagent.train import memory
    from termagent.train.common import load_model, load_tokenizer
    from termagent.train.grpo import GRPOParams, GRPOPaths, RunLog, grpo_config, make_trainer_class

    grpo = section(profile, "grpo", GRPOParams)
    params = replace(grpo, use_vllm=use_vllm, max_steps=1, max_completion_length=sizes["grpo_completion"],
                     trl={**grpo.trl, "save_steps": 1000})
    c = params.effective()
    paths = GRPOPaths(out=work / "grpo" / "adapter", rollouts_dir=work / "grpo" / "rollouts",
                      metrics_dir=work / "grpo" / "metrics", checkpoints=work / "grpo" / "checkpoints",
                      warmup=work / "grpo" / "start")
    for d in (paths.rollouts_dir, paths.metrics_dir, paths.checkpoints):
        d.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(base)
    rng = random.Random(2)
    n_prompts = c.generation_batch_size // c.num_generations
    tasks = {f"task-{i}": render_prompt(f"Count the logs under /var/log/app{i}.", filler(tokenizer, 300, rng))
             for i in range(n_prompts)}
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": text}], "task_id": tid}
                                 for tid, text in tasks.items()])
    p = memory.plan("grpo", shape, seq_len=c.max_prompt_length + c.max_completion_length,
                    micro_batch=c.per_device_train_batch_size, checkpointing=True, lora_r=c.lora.r,
                    lora_targets=c.lora.target_modules, gpu_bytes=gpu)
    reset_peak()
    started = time.perf_counter()
    model = load_model(base)
    env = OfflineEnv(tasks)
    run_log = RunLog(paths.rollouts_dir)
    trainer = make_trainer_class()(model=model, processing_class=tokenizer, reward_funcs=env.reward_functions(),
                                   args=grpo_config(params, paths, [tokenizer.eos_token_id]), train_dataset=dataset,
                                   peft_config=c.lora.to_peft(), env=env, run_log=run_log)
    load_s = time.perf_counter() - started
    t0 = time.perf_counter()
    trainer.train()
    step_s = time.perf_counter() - t0
    run_log.close()
    timing = run_log.step_timings[-1] if run_log.step_timings else {}
    del trainer, model
    return {"generation": "vllm colocate" if use_vllm else "in-process model", "use_vllm": use_vllm,
            "completions": c.generation_batch_size, "num_generations": c.num_generations,
            "micro_batch": c.per_device_train_batch_size, "completion_len": c.max_completion_length,
            "step_s": round(step_s, 1), "generate_s": round(timing.get("generate", 0.0), 1),
            "backward_s": round(timing.get("backward", 0.0), 1), "load_s": round(load_s, 1),
            "generated_tokens_per_s": round(c.generation_batch_size * c.max_completion_length
                                            / timing["generate"], 1) if timing.get("generate") else None,
            "peak_memory_gib": peak_gib(), **planned(p)}


class SyntheticTrajectories:
    """MT-GRPO's rollout_func with synthetic episodes: per row a first prompt of `prompt` tokens and a trajectory
    of `trajectory` tokens in `turns` sampled spans with environment tokens between (env_mask 0), an outcome
    of 0 or 1 and per-turn exec/format signals, in the shape MultiTurnRollout returns."""

    def __init__(self, vocab: int, prompt: int, trajectory: int, turns: int, seed: int = 0):
        self.vocab, self.prompt, self.trajectory, self.turns = vocab, prompt, trajectory, turns
        self.rng = random.Random(seed)
        self.last_stats = {}

    def __call__(self, prompts, trainer) -> dict:
        rows = []
        inputs = trainer._rollout_inputs
        per_turn = self.trajectory // self.turns
        for row in inputs:
            completion, env_mask, spans = [], [], []
            for t in range(self.turns):
                sampled = int(per_turn * 0.4)
                spans.append([len(completion), len(completion) + sampled])
                completion += [self.rng.randrange(3, self.vocab) for _ in range(per_turn)]
                env_mask += [1] * sampled + [0] * (per_turn - sampled)
            while env_mask and env_mask[-1] == 0:  # a trajectory ends on the model's last token
                completion.pop()
                env_mask.pop()
            ok = [self.rng.random() < 0.6 for _ in range(self.turns)]
            rows.append({"prompt_ids": [self.rng.randrange(3, self.vocab) for _ in range(self.prompt)],
                         "completion_ids": completion, "logprobs": [-1.0] * len(completion), "env_mask": env_mask,
                         "outcome": float(self.rng.random() < 0.5), "status": "kept", "turn_spans": spans,
                         "turn_exec_ok": ok, "turn_format_ok": ok, "turn_exec_rc": [0 if o else 1 for o in ok],
                         "drift": ["clean"] * self.turns, "drift_at": [None] * self.turns, "verifier_reward": None,
                         "task_id": row["task_id"], "ended_by": "done", "durations": {}, "prompt_messages": [],
                         "turn_completions": [""] * self.turns})
        return {key: [r[key] for r in rows] for key in rows[0]}


class GeneratedEpisodes:
    """MT-GRPO's rollout_func generating for real, as MultiTurnRollout does but without containers: each row is an
    episode run on its own thread (the trial runner's shape): a first prompt of `prompt` tokens, then `turns`
    replies of up to 40 % of `trajectory / turns` tokens each with a shell-like observation between, every call going
    TokenBufferPolicy -> the project's BatchingPolicy -> the trainer's vLLM engine (TRLvLLMPolicy; TRL pushed the
    LoRA-merged weights into it before this call) or, without vLLM (the CPU dry run), the in-process model. The rows
    come from mt_grpo.rollout_row; each episode's outcome is 0 or 1 at random (no verifier here)."""

    def __init__(self, params, prompt: int, trajectory: int, turns: int, seed: int = 0):
        self.params, self.prompt, self.turns = params, prompt, turns
        self.reply = max(8, int(trajectory * 0.4) // turns)
        self.observation = max(8, (trajectory - turns * self.reply) // max(1, turns - 1))
        self.rng = random.Random(seed)
        self.last_stats = {}

    def __call__(self, prompts, trainer) -> dict:
        from concurrent.futures import ThreadPoolExecutor

        from termagent.policy.batching import BatchingPolicy
        from termagent.policy.hf import HFPolicy
        from termagent.train.mt_grpo import rollout_row
        from termagent.train.tito import ChatSuffix, TokenBufferPolicy

        inputs = trainer._rollout_inputs
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        was_training = model.training
        model.eval()
        hf = HFPolicy.from_model(model, tokenizer, name="gpu_check", max_batch=len(inputs))
        backend = hf
        if getattr(trainer, "use_vllm", False):
            from termagent.policy.trl_vllm import TRLvLLMPolicy

            backend = TRLvLLMPolicy(trainer.vllm_generation, hf, name="gpu_check")
        shared = BatchingPolicy(backend, max_batch=len(inputs), gather_s=1.0)
        suffix = ChatSuffix.from_tokenizer(tokenizer)
        buffers = [TokenBufferPolicy(base=shared, suffix=suffix, eos_ids=hf.eos_ids, name="gpu_check",
                                     max_completion_tokens=trainer.args.max_completion_length) for _ in inputs]
        texts = [(f"Count the logs ({row['task_id']}).\n" + filler(tokenizer, self.prompt - 16, self.rng),
                  [filler(tokenizer, self.observation, self.rng) for _ in range(self.turns - 1)]) for row in inputs]

        def episode(i: int) -> dict:
            first, observations = texts[i]
            messages, turns = [{"role": "user", "content": first}], []
            for t in range(self.turns):
                [g] = buffers[i].generate([messages], max_tokens=self.reply, temperature=self.params.temperature)
                turns.append({"completion_ids": g.completion_ids, "completion": g.text, "rc": 0, "parse_ok": True,
                              "messages_in": messages if t == 0 else None})
                if t < self.turns - 1:
                    messages = [*messages, {"role": "assistant", "content": g.text},
                                {"role": "user", "content": observations[t]}]
            return {"task_id": inputs[i]["task_id"], "reward": float(i % 2), "error": None, "timings": {},
                    "agent_result": {"ended_by": "task_complete", "turns": turns}}

        started = time.perf_counter()
        try:
            with ThreadPoolExecutor(len(inputs), thread_name_prefix="episode") as pool:
                trials = list(pool.map(episode, range(len(inputs))))
        finally:
            shared.close()
            model.train(was_training)
        wall = time.perf_counter() - started
        eos = tokenizer.eos_token_id
        rows = [rollout_row(trial, buffer, filter_mode=self.params.filter_mode, fallback_prompt_ids=[eos],
                            eos_id=eos) for trial, buffer in zip(trials, buffers)]
        sampled = sum(sum(r["env_mask"]) for r in rows)
        self.last_stats = {"rollout_wall_s": wall, "batches": shared.stats["batches"],
                           "mean_rows_per_batch": shared.stats["rows"] / max(1, shared.stats["batches"])}
        self.report = {"rollout_s": round(wall, 1), "sampled_tokens": sampled,
                       "sampled_tokens_per_s": round(sampled / wall, 1), "generate_calls": shared.stats["batches"],
                       "mean_rows_per_call": round(self.last_stats["mean_rows_per_batch"], 2),
                       "trajectory_tokens": max(len(r["completion_ids"]) for r in rows)}
        return {key: [r[key] for r in rows] for key in rows[0]}


def run_mt_grpo(base: Path, work: Path, profile: dict, sizes: dict, shape, gpu, *, use_vllm: bool,
                generate: bool) -> dict:
    from datasets import Dataset

    from termagent.params import section
    from termagent.train import memory
    from termagent.train.common import load_model, load_tokenizer
    from termagent.train.mt_grpo import MTGRPOParams, make_trainer_class, mt_grpo_config, outcome_reward

    params = replace(section(profile, "mt_grpo", MTGRPOParams), use_vllm=use_vllm, max_steps=1)
    p = memory.mt_grpo_plan(asdict(params), shape, gpu)
    tokenizer = load_tokenizer(base)
    rows = [{"prompt": f"task-{i}", "task_id": f"task-{i}"} for i in range(params.tasks_per_step)]
    reset_peak()
    started = time.perf_counter()
    model = load_model(base)
    if generate:
        rollout = GeneratedEpisodes(params, sizes["mt_prompt"], sizes["mt_trajectory"], sizes["mt_turns"])
    else:
        rollout = SyntheticTrajectories(len(tokenizer), sizes["mt_prompt"], sizes["mt_trajectory"],
                                        sizes["mt_turns"])
    trainer = make_trainer_class()(model=model, processing_class=tokenizer, args=mt_grpo_config(params, work / "mt"),
                                   train_dataset=Dataset.from_list(rows), reward_funcs=[outcome_reward],
                                   rollout_func=rollout, peft_config=params.lora.to_peft(), mt_params=params,
                                   rollouts_dir=work / "mt" / "rollouts")
    load_s = time.perf_counter() - started
    t0 = time.perf_counter()
    result = trainer.train()
    step_s = time.perf_counter() - t0
    batch = params.tasks_per_step * params.num_generations
    tokens = batch * (sizes["mt_prompt"] + sizes["mt_trajectory"])
    del trainer, model
    how = (("vllm colocate" if use_vllm else "in-process model") + ", generated episodes") if generate else \
        "synthetic trajectories (no generation)"
    return {"rollouts": how, "use_vllm": use_vllm, "trajectories": batch, "micro_batch": params.micro_batch_size,
            "prompt_tokens": sizes["mt_prompt"], "trajectory_tokens": sizes["mt_trajectory"],
            "gradient_checkpointing": params.gradient_checkpointing, "step_s": round(step_s, 1),
            "load_s": round(load_s, 1), "tokens_per_s": round(tokens / step_s, 1),
            "generation": getattr(rollout, "report", None), "train_loss": result.training_loss,
            "peak_memory_gib": peak_gib(), **planned(p)}


# -- main -----------------------------------------------------------------------------------------------------
def write(out: Path, result: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(tmp, out)


def installed_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def vllm_choice(wanted: str, *, dry: bool) -> tuple[bool, str]:
    """(use vLLM, why): TRL's own test of an installed vLLM it accepts (trl.import_utils.is_vllm_available)."""
    from trl.import_utils import is_vllm_available

    if wanted == "off":
        return False, "--vllm off"
    if dry:
        return False, "a CPU dry run (TRL's vLLM colocate needs CUDA)"
    if not is_vllm_available():
        found = installed_version("vllm")
        return False, (f"vllm {found} is installed but TRL does not accept it" if found else "vllm is not installed")
    return True, f"vllm {installed_version('vllm')} installed: colocate, as profiles/h100.yaml trains"


def merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = merge(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="metrics/bench_gpu.json")
    parser.add_argument("--cpu-dry-run", action="store_true", help="toy shapes on CPU: checks the code, times nothing useful")
    parser.add_argument("--work", default=None, help="scratch directory for the model and adapters (default: a temp dir)")
    parser.add_argument("--parts", default="sft,sft_nockpt,dpo,grpo,mt_grpo")
    parser.add_argument("--vllm", choices=["auto", "on", "off"], default="auto",
                        help="GRPO and MT-GRPO generate on the trainer's vLLM engine (colocate, as the H100 profile "
                             "trains): auto = when vLLM is installed (never in a CPU dry run)")
    parser.add_argument("--mt-rollouts", choices=["auto", "generated", "synthetic"], default="auto",
                        help="MT-GRPO's rollouts: generated episodes (model calls from threads through the project's "
                             "batching) or synthetic token rows; auto = generated when vLLM is used")
    args = parser.parse_args()
    import peft
    import torch
    import transformers
    import trl

    from termagent.params import load_params
    from termagent.train import common, memory

    if not torch.cuda.is_available() and not args.cpu_dry_run:
        print("gpu_check: no CUDA device (torch.cuda.is_available() is False); this check needs one H100/H200. "
              "Use --cpu-dry-run to exercise the code at toy shapes.", file=sys.stderr)
        return 2
    use_vllm, vllm_why = vllm_choice(args.vllm, dry=args.cpu_dry_run)
    if args.vllm == "on" and not use_vllm:
        print(f"gpu_check: --vllm on, but {vllm_why}", file=sys.stderr)
        return 2
    generate = args.mt_rollouts == "generated" or (args.mt_rollouts == "auto" and use_vllm)
    common.USE_DVCLIVE = False
    dry = args.cpu_dry_run
    device = torch.device("cpu" if dry else "cuda")
    dtype = torch.float32 if dry else torch.bfloat16
    shape_cfg, sizes = (TOY, TOY_SIZES) if dry else (FULL, FULL_SIZES)
    profile = load_params(REPO / "params.yaml", REPO / "profiles/h100.yaml")
    if dry:
        profile = merge(profile, TOY_PROFILE)
    shape = memory.ModelShape.from_config({**shape_cfg, "tie_word_embeddings": False})
    gpu = memory.gpu_total_bytes()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    out = Path(args.out)
    started = time.perf_counter()
    result = {"dry_run": dry, "device": torch.cuda.get_device_name(0) if not dry else "cpu",
              "gpu_memory_gib": round(gpu / 2**30, 1) if gpu else None, "dtype": str(dtype).replace("torch.", ""),
              "model_shape": shape_cfg, "sizes": sizes,
              "versions": {"torch": torch.__version__, "python": platform.python_version(),
                           "transformers": transformers.__version__, "peft": peft.__version__,
                           "trl": trl.__version__, "vllm": installed_version("vllm")},
              "vllm": {"used": use_vllm, "why": vllm_why}, "parts": {}}
    print(f"vllm: {'used' if use_vllm else 'not used'} ({vllm_why})", flush=True)
    try:
        base = work / "base"
        result["base"] = build_base(base, shape_cfg, dtype, device)
        print(f"base: {result['base']}", flush=True)
        write(out, result)
        wanted = args.parts.split(",")
        adapter = None
        for name in wanted:
            try:
                if name in ("sft", "sft_nockpt"):
                    part = run_sft(base, work, profile, sizes, shape, gpu, checkpointing=name == "sft")
                    adapter = adapter or part.get("adapter")
                elif name == "dpo":
                    if adapter is None:
                        part = run_sft(base, work, profile, sizes, shape, gpu, checkpointing=True)
                        adapter = part["adapter"]
                    part = run_dpo(base, Path(adapter), work, profile, sizes, shape, gpu)
                elif name == "grpo":
                    part = run_grpo(base, work, profile, sizes, shape, gpu, use_vllm=use_vllm)
                elif name == "mt_grpo":
                    part = run_mt_grpo(base, work, profile, sizes, shape, gpu, use_vllm=use_vllm, generate=generate)
                else:
                    raise SystemExit(f"--parts: unknown part {name!r}")
            except torch.cuda.OutOfMemoryError as error:
                part = {"error": f"OutOfMemoryError: {str(error)[:300]}", "peak_memory_gib": peak_gib()}
            empty_cache()
            result["parts"][name] = part
            result["wall_s"] = round(time.perf_counter() - started, 1)
            print(f"{name}: {part}", flush=True)
            write(out, result)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{out}: written ({result['wall_s']} s)")
    return 0 if all("error" not in p for p in result["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

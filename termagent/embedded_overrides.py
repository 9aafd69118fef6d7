"""Why params.yaml (the embedded CPU profile) sets some keys away from their dataclass defaults.

`EMBEDDED_OVERRIDES` maps `section.key` to the reason; tests/test_params_defaults.py fails on any other
difference between params.yaml and the config dataclasses (termagent.params.SECTIONS), and on an entry
whose key params.yaml no longer overrides. Read by that test only: no stage imports this module, so it is
no DVC dependency and editing a reason reruns nothing.
"""

from __future__ import annotations

# `section.key` -> why params.yaml (the embedded CPU profile) sets it away from the dataclass default.
EMBEDDED_OVERRIDES: dict[str, str] = {
    "base_model.source": "CPU profile: SmolLM2-135M-Instruct from a pinned PyPI wheel (no Hub access on the 2-core "
                         "machine); the dataclass default is the H100's Hub snapshot",
    "agent.max_turns": "CPU profile: 8 turns keep an eval within minutes (the demos take 4.1 on average)",
    "agent.max_output_tokens": "CPU profile: the demos' replies average 71 SmolLM2 tokens; the untrained base writes "
                               "to the cap every turn, so the cap sets base_eval's cost",
    "agent.temperature": "CPU profile: greedy decoding, one attempt per task (the H100 samples 5 at 0.7): run 7's SFT "
                         "adapter solved 3 of 40 eval_id tasks at 0.7 and 8 of 40 greedily (docs/experiments.md)",
    "agent.max_failed_replies": "CPU profile: the base model rarely writes a usable reply; 2 failed replies in a row "
                                "end its episode instead of 8 turns at the cap (base_eval's cost)",
    # SmolLM2 with LoRA on 2 cores: a short, high-rate pass instead of the GPU configuration's (docs/design.md#the-gpu-configuration) 2 epochs at 8k tokens
    **{f"{stage}.{key}": "CPU profile: SmolLM2 LoRA on 2 cores: demos are 1.1 k tokens (median), 8 per optimizer "
                         "step, a rate for a few dozen steps (the 8B's is for thousands)"
       for stage in ("warmup", "sft") for key in ("max_length", "num_train_epochs", "max_steps", "learning_rate",
                                                  "warmup_ratio", "gradient_accumulation_steps", "logging_steps", "lora.r",
                                                  "lora.alpha")},
    "warmup.enabled": "CPU profile: SmolLM2 writes no usable Terminus reply zero-shot; GRPO needs a start that can "
                      "be scored",
    "sft.datasets": "CPU profile: the demos plus the API-ranked set built from our own GRPO rollouts",
    **{f"dpo.{key}": "CPU profile: short pairs, a high rate and small accumulation for a handful of pairs"
       for key in ("max_length", "learning_rate", "gradient_accumulation_steps")},
    "dpo.num_train_epochs": "CPU profile: a 3-step GRPO run yields a handful of pairs; two epochs are two steps",
    "dpo.warmup_ratio": "CPU profile: in a run of a few steps the warmup's first step has learning rate 0",
    "dpo.skip_if_empty": "CPU profile: a short GRPO run may yield no pair; the SFT adapter then passes through",
    "grpo.num_generations": "CPU profile: groups of 4 (8 on the H100) keep a step within a minute or two on 2 cores",
    "grpo.gradient_accumulation_steps": "CPU profile: 4 x 2 = 2 prompts x 4 replies per step",
    "grpo.round2.gradient_accumulation_steps": "CPU profile: round 2's group of 16 needs 4 x 4 per step",
    "grpo.max_steps": "CPU profile: 3 steps (the H100 runs 200)",
    "grpo.learning_rate": "CPU profile: 4x the H100's 5e-6 so 3 steps move the warmup adapter",
    "grpo.max_prompt_length": "CPU profile: SmolLM2's first prompts are at most 1,232 tokens",
    "grpo.max_completion_length": "CPU profile: one JSON action, the agent's max_output_tokens; 2048 on the H100",
    "grpo.save_steps": "CPU profile: a checkpoint every 2 steps so a crash loses little",
    "grpo.concurrency": "CPU profile: 4 containers at once on 2 cores",
    "grpo.use_vllm": "CPU profile: no GPU, generation in-process with transformers",
    "mt_grpo.use_vllm": "CPU profile: no GPU, rollouts generate in-process with transformers",
    "eval.concurrency": "CPU profile: 8 trials at once, their calls decoded as one batch over per-episode KV "
                        "caches (metrics/bench_batching.json)",
    "eval.max_per_split": "CPU profile: 40 of the 64 eval_id instances (spread over the families) keep each of the "
                          "six evals of SmolLM2 within minutes",
    "eval.attempts": "CPU profile: one attempt per task; the paired bootstrap resamples tasks (5 on the H100)",
    "demos.concurrency": "CPU profile: oracle episodes mostly wait on the terminal; 6 containers keep 2 cores busy",
    "mt_grpo.learning_rate": "CPU profile: 4x the H100 rate so 2 steps move the DPO adapter",
    **{f"mt_grpo.{key}": "CPU profile: 2 steps of 2 groups x 4 trajectories (8 episodes, one batched rollout) of at "
                         "most 6 turns of 192 tokens"
       for key in ("num_generations", "tasks_per_step", "max_turns", "max_turn_tokens", "max_completion_length")},
    "datasets.fail_threshold": "CPU profile: pytest partial credit below 0.6 counts as failing, so a short GRPO run "
                               "yields DPO pairs (0.3 on the H100)",
}

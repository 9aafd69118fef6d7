"""Why params.yaml (the embedded CPU profile) sets some keys away from their dataclass defaults.

`EMBEDDED_OVERRIDES` maps `section.key` to the reason; tests/test_params_defaults.py fails on any other
difference between params.yaml and the config dataclasses (termagent.params.SECTIONS), and on an entry
whose key params.yaml no longer overrides. Read by that test only: no stage imports this module, so it is
no DVC dependency and editing a reason reruns nothing.
"""

from __future__ import annotations

# `section.key` -> why params.yaml (the embedded CPU profile) sets it away from the dataclass default.
EMBEDDED_OVERRIDES: dict[str, str] = {
    "agent.max_turns": "CPU profile: the tiny model rarely ends a task; 8 turns keep base_eval within minutes",
    "agent.max_output_tokens": "CPU profile: 98 % of the demos' replies fit 256 tokens (median 59); the random "
                               "base model writes to the cap every turn, so the cap sets base_eval's cost",
    "agent.max_failed_replies": "CPU profile: the random base model never writes a usable reply; 3 failed "
                                "replies in a row end its episode instead of 8 turns of 256 tokens (base_eval's "
                                "cost). No trained model's eval trial had more than 3 in a row (stop 23's evals)",
    # The tiny random-init model learns the Terminus format only from many passes at a high rate on short
    # sequences; the dataclass keeps DESIGN.md §4's values for a real model.
    **{f"{stage}.{key}": "CPU profile: the tiny model needs many passes at a high rate on short sequences"
       for stage in ("warmup", "sft") for key in ("max_length", "num_train_epochs", "learning_rate", "warmup_ratio",
                                                  "gradient_accumulation_steps", "logging_steps", "lora.r",
                                                  "lora.alpha", "lora.modules_to_save")},
    **{f"warmup.{key}": "CPU profile: the short-context curriculum that teaches the random-init tiny model the "
                        "reply format (issue 9); a pretrained model needs none"
       for key in ("window_epochs", "window_context", "window_learning_rate", "window_lr_scheduler_type")},
    "warmup.rename_copies": "CPU profile: the random-init tiny model learns to copy a task's names into its "
                            "commands only from demos whose names are renamed at random (issue 9)",
    "sft.rename_copies": "CPU profile: one renamed copy of every conversation (1 epoch over twice the data: the "
                         "steps of 2 epochs), so the LoRA learns to copy the task's names, not the demos' (issue 9)",
    "warmup.rename_each_pass": "CPU profile: a fresh renaming per window pass, so the renamed names cannot be "
                                "memorised across passes, only copied (issue 9)",
    "warmup.window_micro_batches": "CPU profile: the windows' random batch of 16 in 4 length-balanced "
                                   "micro-batches: the same step with 1.04x padding instead of 1.79x",
    **{f"warmup.{key}": "CPU profile: the window phase measures the copy of a stem's number on held-out renamed "
                        "windows and ends once it reaches 0.7 (it emerged at a run-dependent step, or not at all, "
                        "within 1,566 fixed steps: issue 10)"
       for key in ("window_copy_eval_every", "window_copy_target")},
    "warmup.enabled": "CPU profile: the random-init tiny model must learn the format before GRPO can score it",
    **{f"{stage}.per_device_train_batch_size": "CPU profile: 4 short conversations per step keep the 2 cores busy"
       for stage in ("warmup", "sft")},
    "warmup.full_finetune": "CPU profile: a LoRA on the random-init tiny model's frozen random weights learns "
                            "the JSON vocabulary but not its structure (issue 9); train every weight",
    "sft.datasets": "CPU profile: the demos plus the API-ranked set built from our own GRPO rollouts",
    **{f"dpo.{key}": "CPU profile: short pairs, a high rate and small accumulation for the tiny model"
       for key in ("max_length", "learning_rate", "gradient_accumulation_steps")},
    "dpo.num_train_epochs": "CPU profile: the 8-step GRPO run yields a handful of pairs, one optimizer step per "
                            "epoch; two epochs are two steps",
    "dpo.warmup_ratio": "CPU profile: in a run of a few steps the warmup's first step has learning rate 0 (one "
                        "step of one: no update at all, which the stage now refuses)",
    "dpo.skip_if_empty": "CPU profile: a short GRPO run may yield no pair; the SFT adapter then passes through",
    "grpo.num_generations": "CPU profile: groups of 4 (8 on the H100) keep a step within a minute on 2 cores",
    "grpo.gradient_accumulation_steps": "CPU profile: 4 x 2 = 2 prompts x 4 replies per step",
    "grpo.round2.gradient_accumulation_steps": "CPU profile: round 2's group of 16 needs 4 x 4 per step",
    "grpo.max_steps": "CPU profile: a few steps show signal in minutes; the H100 runs 200",
    "grpo.learning_rate": "CPU profile: 10x the H100's 5e-6 so a few steps move the tiny model",
    "grpo.max_completion_length": "CPU profile: one short JSON action; 2048 on the H100",
    "grpo.save_steps": "CPU profile: a checkpoint every 2 steps so a crash loses little",
    "grpo.concurrency": "CPU profile: 4 containers at once on 2 cores",
    "grpo.use_vllm": "CPU profile: no GPU, generation in-process with transformers",
    "mt_grpo.use_vllm": "CPU profile: no GPU, rollouts generate in-process with transformers",
    "eval.concurrency": "CPU profile: 8 trials at once, their calls decoded as one batch over per-episode KV "
                        "caches (metrics/bench_batching.json)",
    "demos.concurrency": "CPU profile: oracle episodes mostly wait on the terminal; 6 containers keep 2 cores busy",
    "mt_grpo.learning_rate": "CPU profile: 20x the H100 rate so a few steps move the tiny model",
    "mt_grpo.micro_batch_size": "CPU profile: the 8 trajectories of a rollout batch in one forward/backward (no GPU "
                                "memory to plan; the H100 profile trains them one at a time)",
    **{f"mt_grpo.{key}": "CPU profile: 6 steps of 2 groups x 4 trajectories (8 episodes, one batched rollout), "
                         "one pass over the 11 curated tasks; groups of 2 on one task per step (2 steps) gave the "
                         "tiny model zero reward std, no gradient"
       for key in ("max_steps", "num_generations", "tasks_per_step")},
    "datasets.fail_threshold": "CPU profile: the tiny model's replies mostly leave the input untouched and score "
                               "0.5 (pytest partial credit); under 0.3 the 8-step GRPO run yields no DPO pair",
}

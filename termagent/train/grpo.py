"""Single-turn GRPO (TRL GRPOTrainer + PEFT LoRA) on the terminal tasks, rewarded in real containers.

    python stages/grpo.py        # what `dvc repro grpo` runs; see `train_grpo` for the steps

One step: the generation batch's prompts (the agent's first-turn prompt of a train task, repeated
`num_generations` times) are announced to the sandbox, whose warm pool starts their containers while
the model generates the group in one batched `generate` (transformers in-process on CPU; vLLM colocate on
a GPU); each reply is parsed and, when it would run in the eval loop, typed into a fresh container's tmux
and verified (`termagent.train.single_turn`); TRL turns the three reward components into advantages
(weights = params `grpo.reward`, the sum is `termagent.rewards.single_turn_reward`); the loss and backward
follow. Every completion goes to rollouts.jsonl before the backward pass and every finished step to
steps.jsonl (append-only, fsynced): a crash loses at most the step in flight. The stage resumes from its
last checkpoint when the run's fingerprint (config, start model, tasks) is unchanged; rollouts logged
after that checkpoint (their training was lost) move to rollouts.orphaned.jsonl so the log matches the
model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import shutil
import statistics
import time
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from termagent import atomic
from termagent.params import trl_knobs
from termagent.rewards import RewardWeights
from termagent.rollouts import JsonlAppender, iter_jsonl
from termagent.train.common import LoraParams, is_main_process
from termagent.train.signal_gate import SignalGate, make_gate_callback, zero_loss
from termagent.train.single_turn import Outcome, group_stats, rollout_records, step_record

log = logging.getLogger(__name__)


# What grpo_config sets itself: the typed fields of GRPOParams and these; the rest of GRPOConfig is `grpo.trl`'s.
GRPO_RESERVED = ("output_dir", "data_seed", "gradient_checkpointing", "reward_weights", "save_strategy",
                 "logging_steps", "log_completions", "disable_dropout", "vllm_max_model_length")


@dataclass
class GRPORound2:
    """docs/design.md#the-gpu-configuration, GRPO round 2: what `grpo.round: 2` changes."""

    num_generations: int = 16  # a bigger group: more groups with a nonzero reward std
    max_prompt_length: int = 2048  # longer task prompts admitted
    beta: float = 0.01  # a tighter KL leash for the second round
    gradient_accumulation_steps: int | None = 8  # None: keep round 1's (the batch must hold whole groups)


@dataclass
class GRPOParams:
    """The `grpo:` section. Defaults are docs/design.md#the-gpu-configuration (the H100 run); params.yaml shrinks them for CPU."""

    round: int = 1  # 1 | 2: round 2 applies `round2` (one switch: `dvc exp run -S grpo.round=2`)
    round2: GRPORound2 = field(default_factory=GRPORound2)
    lora: LoraParams = field(default_factory=lambda: LoraParams(r=64, alpha=64))  # docs/design.md#the-gpu-configuration; unused when starting from the warmup adapter (that adapter is trained on)
    reward: RewardWeights = field(default_factory=RewardWeights)  # 0.05 format + 0.10 script + 0.85 verifier
    num_generations: int = 4  # completions per prompt (the group)
    per_device_train_batch_size: int = 2  # completions per micro-batch (2: half the activation peak of 4, same speed)
    gradient_accumulation_steps: int = 4  # micro-batches per optimizer step = one generation batch
    max_steps: int = 30  # optimizer steps (a step skipped for want of signal counts: steps.jsonl `skipped`)
    max_prompt_length: int = 1536  # tokens; longer task prompts are left out (never truncated: eval would not)
    max_completion_length: int = 192  # tokens per reply; a reply cut here runs nothing and earns 0
    temperature: float = 0.7  # a 135 M model at 1.0 breaks its JSON or a command too often (the H100 profile: 1.0)
    # TRL's own knobs, straight into trl.GRPOConfig. beta: the KL coefficient (reference = the start: the base, or
    # TRL's frozen copy of the warmup adapter); loss_type dapo: TRL's token-level loss; scale_rewards group:
    # advantages divided by the group's std; mask_truncated_completions false: a cut-off reply keeps its 0 reward,
    # the model learns to stop; save_steps: the resume point after a crash
    trl: dict[str, Any] = field(default_factory=lambda: {
        "learning_rate": 1e-4, "lr_scheduler_type": "constant", "warmup_steps": 0.0, "beta": 0.0, "top_p": 1.0,
        "top_k": 0, "loss_type": "dapo", "scale_rewards": "group", "mask_truncated_completions": False,
        "save_steps": 2, "save_total_limit": 2},
        metadata=trl_knobs("GRPOConfig", GRPO_RESERVED))
    seed: int = 0
    max_tasks: int = 0  # 0: every train task; N: the first N by id (smoke runs)
    concurrency: int = 4  # replies executed (containers) at once
    strict_format: bool = True  # a reply the parser had to repair is invalid JSON: runs nothing, earns 0 (RESEARCH §3: auto-fixing parsers get hacked)
    use_vllm: bool = False  # H100: generate with vLLM; CPU: in-process transformers
    vllm_mode: str = "colocate"  # vLLM inside the trainer process, sharing the GPU
    vllm_gpu_memory_utilization: float = 0.3  # the rest is the trainer's (8B bf16 + LoRA + activations)
    vllm_enable_sleep_mode: bool = False  # sleep mode reloads weights on every call (RESEARCH §1.6)
    vllm_importance_sampling_mode: str = "token_truncate"  # sequence_mask drops long replies wholesale (#4772)
    rolling_window: int = 20  # steps in the reward's rolling mean ± 1 sigma curve
    # dynamic sampling (DAPO), the screen: a group whose replies all pass or all fail is replaced by a fresh group
    # (of another task when there is one), when that one holds a pass and a fail, for up to this many rounds a
    # step (the budget); 0: such groups stay, with advantage 0
    max_resamples: int = 3
    # a step whose batch still has no outcome signal (every advantage 0) takes no optimizer step: the adapter and
    # Adam's moments stay as they were; the step is counted in steps.jsonl `skipped` and train.json `skipped_steps`
    skip_without_signal: bool = True
    # with measured solve rates (stages/grpo.py --rates): train on the tasks whose rate lies strictly between
    # these; a task never or always solved gives groups of one outcome
    min_rate: float = 0.0
    max_rate: float = 1.0
    # online difficulty filtering: a task whose groups tied (all pass or all fail) this many times leaves the draw
    # for the rest of the run (its rows in a step's batch are swapped for live tasks before generating, and it is
    # no replacement); 0: off. Run 13: a task's group after a 4/4 tie held signal 14 times in 142.
    retire_after_ties: int = 2

    def __post_init__(self) -> None:
        if self.retire_after_ties < 0:
            raise ValueError(f"retire_after_ties must be >= 0 (0: off), got {self.retire_after_ties}")
        if self.round not in (1, 2):
            raise ValueError(f"round must be 1 or 2, got {self.round}")
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2 (a group), got {self.num_generations}")
        eff = self.effective()
        if eff.generation_batch_size % eff.num_generations:
            raise ValueError(f"per_device_train_batch_size x gradient_accumulation_steps ({eff.generation_batch_size}"
                             f", round {self.round}) must be a multiple of num_generations ({eff.num_generations})")

    def effective(self) -> GRPOParams:
        """The config this round trains with (round 2: `round2` applied)."""
        if self.round != 2:
            return self
        r2 = self.round2
        return dataclasses.replace(self, round=1, num_generations=r2.num_generations,
                                   max_prompt_length=r2.max_prompt_length, trl={**self.trl, "beta": r2.beta},
                                   gradient_accumulation_steps=r2.gradient_accumulation_steps
                                   or self.gradient_accumulation_steps)

    @property
    def generation_batch_size(self) -> int:
        return self.per_device_train_batch_size * self.gradient_accumulation_steps


@dataclass(frozen=True)
class GRPOPaths:
    warmup: Path = Path("models/warmup")  # its start.json names the start: the base, or the warmup adapter on it
    out: Path = Path("models/grpo")
    rollouts_dir: Path = Path("data/rollouts/grpo")
    checkpoints: Path = Path("checkpoints/grpo")
    metrics_dir: Path = Path("metrics/grpo")


# ---- the trainer ---------------------------------------------------------------------------------------------

def make_trainer_class():
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    class TerminalGRPOTrainer(GRPOTrainer):
        """GRPOTrainer + the sandbox: containers announced before generation, rollouts logged after scoring,
        time per phase measured, the reward's rolling mean ± 1 sigma logged next to TRL's metrics."""

        def __init__(self, *args, env, run_log: RunLog, rolling_window: int = 20, resample_pool=(),
                     max_resamples: int = 0, skip_without_signal: bool = True, ties: TieLedger | None = None,
                     **kwargs):
            super().__init__(*args, **kwargs)
            self.env = env
            self.run_log = run_log
            self.resample_pool = list(resample_pool)  # dataset rows a group without signal may be replaced by
            self.max_resamples = max_resamples
            self.ties = ties or TieLedger(0)
            self._rewards = deque(maxlen=rolling_window)
            self.gate = SignalGate(skip_without_signal, beta=self.beta)  # termagent/train/signal_gate.py
            self.add_callback(make_gate_callback(self.gate))
            self.add_callback(_StepEnd(self))

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.gate.skip_loss():  # a batch without signal: its loss and gradient are 0 (beta 0)
                return zero_loss(model)
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        def _generate_and_score_completions(self, inputs):
            """One generation batch, scored; then DAPO's dynamic sampling: a group whose replies all pass or all
            fail (no advantage, no gradient) is replaced by a fresh group of a task not in the batch, when that
            group holds a pass and a fail, for up to `max_resamples` rounds. Every generated group is logged to
            rollouts.jsonl (`resample` = its round); the step record describes the batch that trained. The
            batch's tasks are preferred for replacements when the pool holds others; with one task (a screened
            single task) a fresh group of the same task is drawn. A batch still without signal when the rounds
            run out trains nothing: the signal gate skips its optimizer step (counted as skipped)."""
            step = self.state.global_step
            t0 = time.monotonic()
            self.run_log.timing["generate"] = 0.0
            self.run_log.timing["score"] = 0.0
            import random

            g = self.num_generations
            inputs = self.ties.swap_retired(list(inputs), g, self.resample_pool,
                                            random.Random(f"{self.args.seed}/{step}/swap"))
            out, outcomes = self._scored_batch(inputs, step, 0)
            replaced = 0
            for round_ in range(1, self.max_resamples + 1):
                dead = [k for k in range(len(outcomes) // g) if not has_signal(outcomes[k * g:(k + 1) * g])]
                used = {x["task_id"] for x in inputs}
                live = self.ties.live(self.resample_pool) or self.resample_pool
                pool = [row for row in live if row["task_id"] not in used] or live
                if not dead or not pool:
                    break
                picks = random.Random(f"{self.args.seed}/{step}/{round_}").sample(pool, min(len(dead), len(pool)))
                fresh = [dict(row) for row in picks for _ in range(g)]
                new, new_outcomes = self._scored_batch(fresh, step, round_)
                for j, k in enumerate(dead[:len(picks)]):
                    if has_signal(new_outcomes[j * g:(j + 1) * g]):
                        splice_groups(out, new, k * g, j * g, g, pad_id=self._tokenizer.pad_token_id)
                        outcomes[k * g:(k + 1) * g] = new_outcomes[j * g:(j + 1) * g]
                        inputs[k * g:(k + 1) * g] = fresh[j * g:(j + 1) * g]
                        replaced += 1
            if replaced:
                mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
                out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
            timing = self.run_log.timing
            timing["generate_and_score"] = time.monotonic() - t0
            self.gate.observe(self.accelerator, out["advantages"])
            self.run_log.set_trained(step, outcomes, group_size=g, replaced=replaced,
                                     retired=len(self.ties.retired()))
            return out

        def _scored_batch(self, inputs, step: int, round_: int):
            self.env.prepare([x["task_id"] for x in inputs])
            out = super()._generate_and_score_completions(inputs)
            self.run_log.timing["score"] += self.env.last_score_s
            outcomes = list(self.env.last_outcomes)
            g = self.num_generations
            for k in range(len(outcomes) // g):
                group = outcomes[k * g:(k + 1) * g]
                if any(o.reward is not None for o in group):  # an all-infrastructure group says nothing
                    self.ties.record(inputs[k * g]["task_id"], has_signal(group))
            self.run_log.add_rollouts(step, [x["prompt"] for x in inputs], outcomes, group_size=self.num_generations,
                                      generate_s=self.run_log.timing["generate"], resample=round_)
            return out, outcomes

        def _generate(self, prompts):
            t0 = time.monotonic()
            try:
                return super()._generate(prompts)
            finally:
                self.run_log.timing["generate"] += time.monotonic() - t0

        def training_step(self, *args, **kwargs):
            t0 = time.monotonic()
            try:
                return super().training_step(*args, **kwargs)
            finally:
                self.run_log.timing["training_step"] = self.run_log.timing.get("training_step", 0.0) + (
                    time.monotonic() - t0)

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            # GRPOTrainer.log folds its per-step metrics (reward, kl, ...) into `logs` after this point: the
            # step's reward is read where it collects them.
            step_rewards = [r for r in self._metrics["train"].get("reward", []) if math.isfinite(r)]
            if step_rewards and "loss" in logs:  # a training step's log
                self._rewards.append(statistics.fmean(step_rewards))
                mean = statistics.fmean(self._rewards)
                std = statistics.pstdev(self._rewards) if len(self._rewards) > 1 else 0.0
                logs.update({"reward_rolling_mean": mean, "reward_rolling_lo": mean - std,
                             "reward_rolling_hi": mean + std})
            if "loss" not in logs:  # the end-of-training summary: nothing per-step to add
                return super().log(logs, start_time)
            for key, value in self.run_log.last_step_timing.items():
                logs[f"time/{key}_s"] = value
            if self.run_log.last_step:
                logs["infra_failures"] = self.run_log.last_step["n_infra_failures"]
                logs["verifier_pass_rate"] = self.run_log.last_step["verifier_pass_rate"]
                logs["format_valid_rate"] = self.run_log.last_step["format_valid_rate"]
                logs["signal_groups_frac"] = self.run_log.last_step["signal_groups_frac"]
                logs["skipped_step"] = float(self.run_log.last_step["skipped"])
            super().log(logs, start_time)

    class _StepEnd(TrainerCallback):
        def __init__(self, trainer):
            self.trainer = trainer
            self.t0 = time.monotonic()

        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.monotonic()

        def on_step_end(self, args, state, control, **kwargs):
            self.trainer.run_log.end_step(state.global_step - 1, time.monotonic() - self.t0,
                                          skipped=self.trainer.gate.last_skipped)
            if self.trainer.ties.exhausted(self.trainer.resample_pool):
                # every task tied `retire_after_ties` times: a further step would draw retired tasks, tie again
                # and be skipped (run 14: the last 7 of 30 steps, ~10 minutes of generation for no update)
                log.warning("grpo: every one of the %d tasks is retired after step %d: training ends here",
                            len({r["task_id"] for r in self.trainer.resample_pool}), state.global_step)
                self.trainer.run_log.stopped = "every task retired"
                control.should_training_stop = True

    return TerminalGRPOTrainer


class TieLedger:
    """Online difficulty filtering for GRPO's draw: groups without signal (every reply passed, or every one failed)
    counted per task; after `limit` of them a task is retired for the rest of the run. Dynamic sampling alone pays
    for a tied group (a generation batch and its Docker runs) and then for its replacement; a task the start model
    already solves on every first reply keeps tying (run 13: 19 of its 28 tasks were of the rung whose instruction
    names the command, first replies passed 0.97, and a group drawn after a 4/4 tie held a pass and a fail 14 times
    in 142). Retiring such tasks spends the steps on the tasks that still teach something. Rebuilt from
    rollouts.jsonl on resume (`from_rollouts`)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.ties: Counter[str] = Counter()

    def record(self, task_id: str, signal: bool) -> None:
        if not signal:
            self.ties[task_id] += 1

    def is_retired(self, task_id: str) -> bool:
        return self.limit > 0 and self.ties[task_id] >= self.limit

    def retired(self) -> list[str]:
        return sorted(t for t in self.ties if self.is_retired(t))

    def live(self, rows: list[dict]) -> list[dict]:
        """The rows whose task is not retired."""
        return [row for row in rows if not self.is_retired(row["task_id"])]

    def exhausted(self, pool: list[dict]) -> bool:
        """Every task of `pool` is retired (retirement on, pool not empty): nothing is left to draw."""
        return self.limit > 0 and bool(pool) and not self.live(pool)

    def swap_retired(self, inputs: list[dict], group_size: int, pool: list[dict], rng) -> list[dict]:
        """A step's batch (groups of `group_size` rows) with each retired task's group replaced by a live task of
        `pool` not in the batch (drawn with `rng`), as long as one is left; otherwise the group stays."""
        used = {row["task_id"] for row in inputs}
        candidates = [row for row in self.live(pool) if row["task_id"] not in used]
        rng.shuffle(candidates)
        out = list(inputs)
        for k in range(len(inputs) // group_size):
            if self.is_retired(inputs[k * group_size]["task_id"]) and candidates:
                row = candidates.pop()
                out[k * group_size:(k + 1) * group_size] = [dict(row) for _ in range(group_size)]
        return out

    @classmethod
    def from_rollouts(cls, path: Path, limit: int, group_size: int) -> TieLedger:
        """The ledger of the groups a run logged so far (rollouts.jsonl: consecutive rows of a group)."""
        ledger = cls(limit)
        rows = list(iter_jsonl(path)) if Path(path).exists() else []
        for k in range(len(rows) // group_size):
            group = rows[k * group_size:(k + 1) * group_size]
            scored = [r for r in group if r.get("reward") is not None]  # as has_signal: infrastructure left out
            if scored:
                ledger.record(group[0]["task_id"], _signal(scored))
        return ledger


def has_signal(group: list[Outcome]) -> bool:
    """A group carries signal about solving when its scored replies hold a verified pass and a fail."""
    passes = [(o.verifier_reward or 0.0) >= 1.0 for o in group if o.reward is not None]
    return 0 < sum(passes) < len(passes)


def splice_groups(out: dict, new: dict, at: int, src: int, size: int, *, pad_id: int) -> None:
    """Rows [at, at+size) of TRL's scored batch `out` replaced, in place, by rows [src, src+size) of `new`: 1-D
    tensors row for row, 2-D ones padded to the wider of the two first (prompt tensors on the left, as TRL pads
    prompts; completion-aligned ones on the right), ids with `pad_id`, masks and log-probabilities with 0."""
    import torch

    for key, value in list(out.items()):
        other = new.get(key)
        if not torch.is_tensor(value) or value.dim() == 0 or other is None:
            continue
        if value.dim() == 2:
            left = key.startswith("prompt")
            fill = pad_id if key.endswith("_ids") else (1.0 if key == "importance_sampling_ratio" else 0)
            width = max(value.size(1), other.size(1))
            value, other = (_pad_to(t, width, left=left, fill=fill) for t in (value, other))
        value[at:at + size] = other[src:src + size].to(value.dtype)
        out[key] = value


def _pad_to(t, width: int, *, left: bool, fill):
    import torch

    extra = width - t.size(1)
    if extra <= 0:
        return t.clone()
    pad = torch.full((t.size(0), extra), fill, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


class RunLog:
    """rollouts.jsonl / steps.jsonl of a run, and the time each step spent per phase."""

    def __init__(self, rollouts_dir: Path):
        self.rollouts = JsonlAppender(rollouts_dir / "rollouts.jsonl")
        self.steps = JsonlAppender(rollouts_dir / "steps.jsonl")
        self.timing: dict[str, float] = {}
        self._pending: tuple[int, list[Outcome], float, int] | None = None
        self.last_step: dict | None = None
        self.last_step_timing: dict[str, float] = {}
        self.step_timings: list[dict[str, float]] = []
        self.replaced = 0  # groups the last step's dynamic sampling replaced
        self.retired = 0  # tasks out of the draw after the last step's batch (TieLedger)
        self.stopped: str | None = None  # why training ended before max_steps (every task retired), else None

    def add_rollouts(self, step: int, prompts, outcomes: list[Outcome], *, group_size: int, generate_s: float,
                     resample: int = 0):
        records, frac_zero = rollout_records(outcomes, prompts, training_step=step, group_size=group_size,
                                             generate_s=generate_s)
        for r in records:
            r["resample"] = resample  # 0: the step's own draw; k: the k-th round of dynamic sampling
        self.rollouts.write_batch(records)  # before the backward pass: a crash from here loses no reply
        self._pending = (step, list(outcomes), frac_zero, group_size)

    def set_trained(self, step: int, outcomes: list[Outcome], *, group_size: int, replaced: int,
                    retired: int = 0) -> None:
        """The batch the step trains on (after dynamic sampling): its step record's numbers."""
        _, frac_zero = group_stats([o.reward for o in outcomes], group_size)
        self._pending = (step, list(outcomes), frac_zero, group_size)
        self.replaced = replaced
        self.retired = retired

    def end_step(self, step: int, step_s: float, *, skipped: bool = False) -> None:
        if self._pending is None:
            return
        gen_step, outcomes, frac_zero, group_size = self._pending
        t = self.timing
        timings = {"step": step_s, "generate": t.get("generate", 0.0), "score": t.get("score", 0.0),
                   "backward": max(0.0, t.get("training_step", 0.0) - t.get("generate_and_score", 0.0)),
                   **_trial_means(outcomes)}
        timings["other"] = max(0.0, step_s - t.get("training_step", 0.0))  # optimizer, logging, checkpoints
        record = step_record(outcomes, training_step=gen_step, frac_zero_std=frac_zero, timings=timings,
                             group_size=group_size)
        record["resampled_groups"] = self.replaced
        record["retired_tasks"] = self.retired
        record["skipped"] = skipped  # no group with outcome signal: no optimizer step (termagent/train/signal_gate.py)
        self.steps.write(record)
        self.last_step, self.last_step_timing = record, {k: round(v, 4) for k, v in timings.items()}
        self.step_timings.append(timings)
        self._pending, self.timing = None, {}

    def close(self) -> None:
        self.rollouts.close()
        self.steps.close()


def _trial_means(outcomes: list[Outcome]) -> dict[str, float]:
    """Per executed reply, mean seconds: waiting for its container, tmux + commands, verifier, removal."""
    executed = [o.durations for o in outcomes if o.executed]
    keys = {"create": "container_wait", "create_engine": "container_start", "agent": "agent",
            "verify": "verify", "remove": "container_remove"}
    return {name: statistics.fmean(d.get(k, 0.0) for d in executed) if executed else 0.0
            for k, name in keys.items()}


# ---- resume --------------------------------------------------------------------------------------------------

def fingerprint(config: GRPOParams, start_model: dict, tasks: list[tuple[str, str]], extra: dict) -> str:
    doc = {"config": dataclasses.asdict(config), "start": start_model, "tasks": sorted(tasks), "extra": extra}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def last_checkpoint(checkpoints: Path) -> Path | None:
    found = [p for p in checkpoints.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[-1]), default=None)


def prepare_run_dirs(paths: GRPOPaths, run_id: str) -> Path | None:
    """The checkpoint to resume from (same fingerprint, one exists), after moving the rollouts and step
    records of steps after it to *.orphaned.jsonl and trimming the curves; else a clean slate."""
    run_file = paths.rollouts_dir / "run.json"
    previous = json.loads(run_file.read_text()).get("fingerprint") if run_file.is_file() else None
    checkpoint = last_checkpoint(paths.checkpoints) if previous == run_id else None
    if not is_main_process():  # a multi-GPU rank: read only, rank 0 clears / trims the run dirs
        return checkpoint
    if checkpoint is None:
        for path in (paths.rollouts_dir, paths.checkpoints, paths.metrics_dir / "dvclive"):
            if path.exists():
                shutil.rmtree(path)
        paths.rollouts_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_json(run_file, {"fingerprint": run_id})
        return None
    step = json.loads((checkpoint / "trainer_state.json").read_text())["global_step"]
    for name in ("rollouts.jsonl", "steps.jsonl"):
        _split_log(paths.rollouts_dir / name, keep=lambda r: r.get("training_step", 0) < step)
    _trim_dvclive(paths.metrics_dir / "dvclive", step)
    log.info("resuming from %s (step %d)", checkpoint, step)
    return checkpoint


def _split_log(path: Path, keep) -> None:
    """Rewrite `path` with the records `keep` accepts; the others are appended to <name>.orphaned.jsonl."""
    if not path.is_file():
        return
    kept, orphaned = [], []
    for record in iter_jsonl(path):
        (kept if keep(record) else orphaned).append(record)
    if orphaned:
        with JsonlAppender(path.with_suffix(".orphaned.jsonl")) as out:
            out.write_batch(orphaned)
    text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in kept)
    atomic.write_text(path, text, fsync=True)


def _trim_dvclive(live_dir: Path, step: int) -> None:
    """Drop curve points of steps >= `step` (they are logged again by the resumed run)."""
    for tsv in (live_dir / "plots" / "metrics").rglob("*.tsv") if live_dir.is_dir() else []:
        lines = tsv.read_text().splitlines()
        if not lines or "step" not in lines[0].split("\t"):
            continue
        col = lines[0].split("\t").index("step")  # "step\tvalue" (dvclive 3.49) or "timestamp\tstep\tvalue"
        keep = lines[:1] + [line for line in lines[1:] if int(float(line.split("\t")[col])) < step]
        atomic.write_text(tsv, "\n".join(keep) + "\n")


# ---- the run -------------------------------------------------------------------------------------------------

def grpo_config(config: GRPOParams, paths: GRPOPaths, tokenizer_eos: list[int]):
    from trl import GRPOConfig

    from termagent.train.common import training_kwargs, vllm_kwargs

    c = config.effective()
    vllm = vllm_kwargs("grpo", use_vllm=c.use_vllm, mode=c.vllm_mode,
                       gpu_memory_utilization=c.vllm_gpu_memory_utilization,
                       enable_sleep_mode=c.vllm_enable_sleep_mode,
                       importance_sampling_mode=c.vllm_importance_sampling_mode,
                       max_model_length=c.max_prompt_length + c.max_completion_length)
    return GRPOConfig(**training_kwargs(
        output_dir=paths.checkpoints, seed=c.seed, gradient_checkpointing=True,
        per_device_train_batch_size=c.per_device_train_batch_size,
        gradient_accumulation_steps=c.gradient_accumulation_steps, max_steps=c.max_steps,
        num_generations=c.num_generations, max_completion_length=c.max_completion_length,
        temperature=c.temperature, reward_weights=[c.reward.format, c.reward.script, c.reward.verifier],
        save_strategy="steps", logging_steps=1, log_completions=False, disable_dropout=True, **vllm, **c.trl))


def fill_rows(rows: list[dict], prompts_per_step: int) -> list[dict]:
    """The rows repeated until one step's distinct prompts fit: TRL's sampler draws `prompts_per_step` of them per
    step and yields no batch at all from a smaller dataset (GRPO on the one task with signal would run 0 steps)."""
    if not rows:
        return rows
    reps = -(-prompts_per_step // len(rows))
    return rows * reps


def train_grpo(config: GRPOParams, paths: GRPOPaths, *, tasks, sandbox, env_config, extra_fingerprint: dict
               | None = None, progress: bool = True, engine=None, verdict=None) -> dict[str, Any]:
    """Train, save the adapter to `paths.out`, write metrics; returns the summary (metrics/grpo/train.json).

    `tasks`: the train split (already loaded); `sandbox`: a Sandbox for the task containers;
    `env_config`: the single-turn environment's EnvConfig (terminal from the agent section); `engine`: EngineConfig,
    whose `rl` generates on the OpenVINO engine (termagent.train.engine_rollouts);
    `verdict`: a synthetic verifiable reward (termagent.rewards.synthetic) that replaces the task's tests: the
    reward is the verdict alone, nothing is executed (the reward-following tests, scripts/bench_learns.py)."""
    from datasets import Dataset

    from termagent.models.artifact import resolve_start
    from termagent.train.common import (
        StageTimer,
        adapter_state,
        dvclive_callback,
        load_model,
        load_tokenizer,
        plot_curves,
        save_adapter,
        seed_everything,
        write_stage_metrics,
    )
    from termagent.train.single_turn import SingleTurnEnv

    if verdict is not None:
        config = dataclasses.replace(config, reward=RewardWeights())  # the verdict is the whole reward
        extra_fingerprint = {**(extra_fingerprint or {}), "verdict": verdict.name}
    c = config.effective()
    timer = StageTimer()
    tasks = sorted(tasks, key=lambda t: t.id)[: c.max_tasks or None]
    if not tasks:
        raise ValueError("grpo: no training task (data/tasks.json has no task in split 'train')")
    # One switch decides where GRPO starts: warmup.enabled (the warmup stage records it in start.json).
    base_dir, start_dir = resolve_start(paths.warmup)
    start = {"base": model_digest(base_dir), "warmup": model_digest(start_dir) if start_dir else None}
    run_id = fingerprint(config, start, [(t.id, t.content_hash) for t in tasks], extra_fingerprint or {})
    resume = prepare_run_dirs(paths, run_id)
    seed_everything(c.seed)

    tokenizer = load_tokenizer(base_dir)
    model = load_model(base_dir, start_dir, trainable=True)
    eos = _eos_ids(model, tokenizer)
    env_config = dataclasses.replace(env_config, weights=c.reward, concurrency=c.concurrency,
                                     strict_format=c.strict_format)
    env = SingleTurnEnv(sandbox, tasks, env_config, eos_token_ids=eos, verdict=verdict)
    with timer.phase("screens"):
        env.probe_screens(paths.rollouts_dir / "screens.json", progress=progress)
    rows, too_long = [], []
    for row in env.dataset_rows():
        n = len(tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True,
                                              return_dict=True)["input_ids"])
        (rows if n <= c.max_prompt_length else too_long).append({**row, "prompt_tokens": n})
    if not rows:
        raise ValueError(f"grpo: every task prompt is longer than grpo.max_prompt_length={c.max_prompt_length}")
    if too_long:
        log.warning("%d task prompts longer than %d tokens left out: %s", len(too_long), c.max_prompt_length,
                    [r["task_id"] for r in too_long])
    dataset = Dataset.from_list(fill_rows([{"prompt": r["prompt"], "task_id": r["task_id"]} for r in rows],
                                          c.generation_batch_size // c.num_generations))

    args = grpo_config(config, paths, eos)
    before = adapter_state(model) if start_dir else None
    run_log = RunLog(paths.rollouts_dir)
    trainer_cls = make_trainer_class()
    trainer = trainer_cls(model=model, processing_class=tokenizer, reward_funcs=env.reward_functions(),
                          args=args, train_dataset=dataset, peft_config=None if start_dir else c.lora.to_peft(),
                          callbacks=[dvclive_callback(paths.metrics_dir)] if resume is None
                          else [_resumed_dvclive(paths.metrics_dir)],
                          env=env, run_log=run_log, rolling_window=c.rolling_window,
                          resample_pool=[{"prompt": r["prompt"], "task_id": r["task_id"]} for r in rows],
                          max_resamples=c.max_resamples, skip_without_signal=c.skip_without_signal,
                          ties=TieLedger.from_rollouts(paths.rollouts_dir / "rollouts.jsonl", c.retire_after_ties,
                                                       c.num_generations))
    if before is None:
        before = adapter_state(trainer.model)
    if resume is not None:  # the rolling mean continues over the steps kept from the first try
        trainer._rewards.extend(s["reward_mean"] for s in iter_jsonl(paths.rollouts_dir / "steps.jsonl"))
    from termagent.train.engine_rollouts import engine_for

    engine_policy = engine_for(trainer, engine, base_dir)
    try:
        with timer.phase("train"):
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finally:
        env.close()
        run_log.close()
        if engine_policy is not None:
            engine_policy.close()
    if trainer.state.global_step == 0:
        raise RuntimeError(f"grpo: TRL ran no optimizer step over {len(dataset)} prompts (grpo.max_steps="
                           f"{c.max_steps}); no adapter is written")
    after = adapter_state(trainer.model)
    delta = math.sqrt(sum(float((after[k] - before[k]).pow(2).sum()) for k in before if k in after))
    with timer.phase("save"):
        save_adapter(trainer.model, tokenizer, paths.out,
                     manifest={"stage": "grpo", "start": "warmup" if start_dir else "base", "base": str(base_dir),
                               "round": config.round, "steps": trainer.state.global_step, "fingerprint": run_id})

    summary = summarize_rollouts(paths.rollouts_dir)
    timing = timing_summary(run_log.step_timings, paths.rollouts_dir / "steps.jsonl")
    if is_main_process():  # save_adapter, plot_curves, write_stage_metrics check it themselves
        atomic.write_json(paths.metrics_dir / "timing.json", timing)
        atomic.write_json(paths.metrics_dir / "reward_distribution.json", reward_histogram(paths.rollouts_dir))
        plot_reward(paths.metrics_dir, paths.rollouts_dir, paths.metrics_dir / "reward.png", c.rolling_window)
    plot_curves(paths.metrics_dir, paths.metrics_dir / "curves.png", "grpo")
    metrics = dict(summary, steps=trainer.state.global_step, round=config.round,
                   start="warmup" if start_dir else "base", resumed_from=str(resume) if resume else None,
                   adapter_delta_l2=delta, tasks=len(rows), tasks_prompt_too_long=len(too_long),
                   # why training ended before grpo.max_steps (None: it ran them all)
                   stopped_early=run_log.stopped,
                   config=dataclasses.asdict(c), seconds_per_step=timing["mean_s"].get("step"))
    write_stage_metrics(paths.metrics_dir / "train.json", "grpo", timer, **metrics)
    return metrics


def _resumed_dvclive(metrics_dir: Path):
    """Like common.dvclive_callback, but continuing the curves of the crashed run (Live(resume=True))."""
    from dvclive import Live
    from transformers.integrations import DVCLiveCallback

    class _StepCallback(DVCLiveCallback):
        def on_log(self, args, state, control, model=None, logs=None, **kwargs):
            if self.live is not None:
                self.live.step = state.global_step
            return super().on_log(args, state, control, model=model, logs=logs, **kwargs)

    live = Live(dir=str(metrics_dir / "dvclive"), dvcyaml=False, save_dvc_exp=False, report=None, resume=True)
    return _StepCallback(live=live, log_model=None)


def _eos_ids(model, tokenizer) -> list[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
    return sorted({*eos, tokenizer.eos_token_id} - {None})


# A model directory's digest for the resume fingerprint. Files up to this size are hashed whole (config,
# tokenizer, manifest.json, the tiny model's weights: the CPU run's digest is what it always was); a larger
# file (an 8B model's weight shards, 16 GB in all) contributes its size and its first and last MiB, so a
# 16 GB snapshot costs a few MiB of reading, not a pass over every byte. What names the weights exactly is
# manifest.json, hashed whole: hf_id and the 40-hex revision of a hub snapshot (the revision is the content
# address), the weights' sha256 of the tiny model.
WHOLE_FILE_MAX = 64 << 20
SAMPLE_BYTES = 1 << 20


def model_digest(path: Path | None, *, whole_file_max: int = WHOLE_FILE_MAX) -> str | None:
    """sha256 over (relative path, content) of each file, sorted; a file over `whole_file_max` bytes stands for
    its size and its first and last SAMPLE_BYTES (never read whole)."""
    if path is None:
        return None
    h = hashlib.sha256()
    for file in sorted(p for p in Path(path).rglob("*") if p.is_file()):
        h.update(str(file.relative_to(path)).encode())
        size = file.stat().st_size
        with open(file, "rb") as f:
            if size <= whole_file_max:
                for chunk in iter(lambda: f.read(SAMPLE_BYTES), b""):
                    h.update(chunk)
            else:
                head = f.read(SAMPLE_BYTES)
                f.seek(max(0, size - SAMPLE_BYTES))
                tail = f.read(SAMPLE_BYTES)
                h.update(f"sampled size={size} head={hashlib.sha256(head).hexdigest()} "
                         f"tail={hashlib.sha256(tail).hexdigest()}".encode())
    return h.hexdigest()


# ---- what the run saw ----------------------------------------------------------------------------------------

def summarize_rollouts(rollouts_dir: Path) -> dict[str, Any]:
    """The numbers the embedded run must show (valid JSON > 0, pass rate in (0, 1), groups with signal)."""
    rows = list(iter_jsonl(rollouts_dir / "rollouts.jsonl"))
    steps = list(iter_jsonl(rollouts_dir / "steps.jsonl")) if (rollouts_dir / "steps.jsonl").is_file() else []
    scored = [r for r in rows if r.get("reward") is not None]
    groups = defaultdict(list)
    for r in scored:
        groups[(r["training_step"], r["task_id"])].append(r)
    n = len(rows)
    return {
        "n_rollouts": n,
        "n_scored": len(scored),
        "n_infra_failures": n - len(scored),
        "valid_json_rate": sum(r["format_reward"] > 0 for r in rows) / n if n else 0.0,
        "parse_ok_rate": sum(bool(r.get("parse_ok")) for r in rows) / n if n else 0.0,
        "script_ok_rate": sum(r["script_reward"] > 0 for r in rows) / n if n else 0.0,
        "verifier_pass_rate": sum(r["verifier_reward"] >= 1.0 for r in scored) / len(scored) if scored else 0.0,
        "verifier_mean": statistics.fmean(r["verifier_reward"] for r in scored) if scored else 0.0,
        "reward_mean": statistics.fmean(r["reward"] for r in scored) if scored else 0.0,
        "groups": len(groups),
        "groups_nonzero_std": sum(r[0]["step_reward_std"] > 0 for r in groups.values()),
        # a group carries signal about solving when it holds a verified pass and a fail
        "groups_signal": sum(_signal(g) for g in groups.values()),
        "groups_signal_frac": round(sum(_signal(g) for g in groups.values()) / len(groups), 4) if groups else 0.0,
        "frac_zero_std_mean": statistics.fmean(s["frac_zero_std"] for s in steps) if steps else None,
        # of the groups the steps trained on (after dynamic sampling): the share with a pass and a fail
        "trained_groups_signal_frac": (round(statistics.fmean(s.get("signal_groups_frac", 0.0) for s in steps), 4)
                                       if steps else None),
        "resampled_groups": sum(s.get("resampled_groups", 0) for s in steps),
        # optimizer steps the signal gate skipped (every group of the batch tied); trained = steps - skipped
        "skipped_steps": sum(bool(s.get("skipped")) for s in steps),
        # tasks out of the draw at the end (grpo.retire_after_ties: their groups tied that many times)
        "retired_tasks": steps[-1].get("retired_tasks", 0) if steps else 0,
        "reward_first_step": steps[0]["reward_mean"] if steps else None,
        "reward_last_step": steps[-1]["reward_mean"] if steps else None,
    }


def _signal(group: list[dict]) -> bool:
    passes = sum(r["verifier_reward"] >= 1.0 for r in group)
    return 0 < passes < len(group)


def timing_summary(step_timings: list[dict[str, float]], steps_file: Path) -> dict[str, Any]:
    """Seconds per GRPO step and where they go (means over this process's steps; all steps' from the log)."""
    if not step_timings and steps_file.is_file():
        step_timings = [s.get("timings", {}) for s in iter_jsonl(steps_file)]
    keys = sorted({k for t in step_timings for k in t})
    mean = {k: round(statistics.fmean(t.get(k, 0.0) for t in step_timings), 4) for k in keys}
    return {
        "n_steps": len(step_timings),
        "mean_s": mean,
        "definitions": {
            "step": "wall time of one optimizer step (generation + scoring + loss/backward + optimizer)",
            "generate": "batched generation of the whole group(s) of the step",
            "score": "wall time from the end of generation to every reply scored (containers, tmux, verifier)",
            "backward": "loss forward + backward over the micro-batches (training_step minus generate/score)",
            "other": "optimizer step, logging, checkpoint saving",
            "container_wait": "per executed reply: waiting for its container (0 when prestarted in time)",
            "container_start": "per executed reply: engine time to create + start it (overlaps generation)",
            "agent": "per executed reply: tmux start + typing the commands + capture",
            "verify": "per executed reply: copying and running the tests",
            "container_remove": "per executed reply: removal",
        },
    }


def reward_histogram(rollouts_dir: Path, bins: int = 20) -> list[dict]:
    """The reward distribution over every scored rollout, as DVC plot rows (bin start, count)."""
    rewards = [r["reward"] for r in iter_jsonl(rollouts_dir / "rollouts.jsonl") if r.get("reward") is not None]
    counts = [0] * bins
    for value in rewards:
        counts[min(bins - 1, max(0, int(value * bins)))] += 1
    return [{"reward": round(i / bins, 4), "count": counts[i]} for i in range(bins)]


def plot_reward(metrics_dir: Path, rollouts_dir: Path, png: Path, window: int) -> Path | None:
    """Reward per step with its rolling mean ± 1 sigma, the three components, and the reward histogram."""
    steps = list(iter_jsonl(rollouts_dir / "steps.jsonl")) if (rollouts_dir / "steps.jsonl").is_file() else []
    if not steps:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s["training_step"] for s in steps]
    y = [s["reward_mean"] for s in steps]
    mean, lo, hi = [], [], []
    for i in range(len(y)):
        w = y[max(0, i - window + 1): i + 1]
        m, sd = statistics.fmean(w), statistics.pstdev(w) if len(w) > 1 else 0.0
        mean.append(m), lo.append(m - sd), hi.append(m + sd)
    rows = list(iter_jsonl(rollouts_dir / "rollouts.jsonl"))
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    axes[0].plot(x, y, ".", alpha=0.5, label="reward (step mean)")
    axes[0].plot(x, mean, label=f"rolling mean ({window})")
    axes[0].fill_between(x, lo, hi, alpha=0.2, label="± 1 sigma")
    axes[0].set_xlabel("step"), axes[0].legend(fontsize=7), axes[0].set_title("reward")
    for key in ("format_reward", "script_reward", "verifier_reward"):
        per = defaultdict(list)
        for r in rows:
            if r.get("reward") is not None:
                per[r["training_step"]].append(r[key])
        xs = sorted(per)
        axes[1].plot(xs, [statistics.fmean(per[s]) for s in xs], label=key.removesuffix("_reward"))
    axes[1].set_xlabel("step"), axes[1].legend(fontsize=7), axes[1].set_title("reward components")
    axes[2].hist([r["reward"] for r in rows if r.get("reward") is not None], bins=20, range=(0, 1))
    axes[2].set_xlabel("reward"), axes[2].set_title("reward distribution (all rollouts)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    with atomic.target(png) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    return png

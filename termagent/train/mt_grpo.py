"""Multi-turn GRPO with turn-level credit (MT-GRPO), on TRL's GRPOTrainer.

    train_mt_grpo(params, agent_config, sandbox, tasks, model_dir=..., start_adapter=..., out_dir=...,
                  rollouts_dir=..., metrics_dir=...)           # what stages/mt_grpo.py runs

A rollout is an evaluation episode: `rollout_func` runs every row of the batch as a trial in a real container
through `TerminusAgent` (termagent/agent/loop.py, the eval loop), the rows of a batch concurrently, their
generate calls coalesced by `BatchingPolicy` around the model being trained. Each episode talks to its own
`TokenBufferPolicy` (termagent/train/tito.py): the trajectory is one token buffer — sampled ids as sampled
(env_mask 1), environment tokens between turns (env_mask 0) — never re-tokenised; a per-turn drift counter
compares it with the message rendering. Summarisation is off (agent context_strategy "end"): a full context
ends the episode as "context_limit".

Rewards and advantages
- Outcome: the verifier's reward R (one reward function, `outcome`). TRL makes the outcome advantage
  A_o = R - mean_group(R): loss_type dr_grpo with scale_rewards "none" only mean-centres it.
- Turns: r(t) = compute_turn_rewards(R, exec_ok, format_ok) with exec_ok[t] = (the turn's commands ran and
  the last one exited 0) and format_ok[t] = (the reply parsed as Terminus JSON, not cut off).
  A_t = compute_turn_advantages(group turn rewards, scale=False) when scale_rewards is "none", i.e.
  r(i, t) - mean over the group's trajectories that reached turn t.
  So both terms are mean-centred rewards in reward units, neither divided by a std: α mixes like with like
  (with scale_rewards "group" both would be std-scaled instead).
- Token advantage: (1 - α)·A_o + α·A_t inside turn t's sampled span, 0 on prompt, environment and padding
  tokens (map_turn_advantages_to_tokens), written by `MTGRPOTrainer` as a (B, T) tensor.
Compact filtering (TRL's mask_truncated_completions looks at the last token only: it stays off):
- trajectories that end on the turn cap, the agent timeout or the context limit: filter_mode "exclude" gives
  them reward None (out of the group mean, advantage 0) and an all-zero env_mask (no loss); "zero" keeps them
  with R = 0 (in the group mean, trained on, pushed away from).
- infrastructure failures (no verifier verdict, or an episode that died on an error): always excluded.
The filtered fraction, the drift counts and the turn statistics go to the trainer's logs (dvclive) and to
steps.jsonl; each row goes to rollouts.jsonl with its `turn_info` (per turn exec_rc, format_valid, token span).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from termagent.agent.config import AgentConfig
from termagent.params import trl_knobs
from termagent.rewards import compute_turn_advantages, compute_turn_rewards, map_turn_advantages_to_tokens
from termagent.train.common import LoraParams
from termagent.train.signal_gate import SignalGate, make_gate_callback, zero_loss

log = logging.getLogger(__name__)

# ended_by "failed_replies" (agent.max_failed_replies) is the model giving up, not a cut: kept.
FILTERED_ENDINGS = {"max_turns": "max_turns", "timeout": "timeout", "context_limit": "context_limit"}


@dataclass
class TurnCreditParams:
    alpha: float = 0.5  # token advantage = (1-α)·outcome + α·turn
    turn_gamma: float = 0.95  # the outcome reaches turn t as R·γ^(T-1-t)
    w_outcome: float = 0.7
    w_exec: float = 0.15  # the turn's commands ran and exited 0
    w_format: float = 0.15  # the turn's reply is valid Terminus JSON
    w_efficiency: float = 0.05  # fewer turns, on success only

    def __post_init__(self):
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"mt_grpo.credit.alpha must be in [0, 1], got {self.alpha}")
        if not 0.0 < self.turn_gamma <= 1.0:
            raise ValueError(f"mt_grpo.credit.turn_gamma must be in (0, 1], got {self.turn_gamma}")


# -- budgets, checked when params load (issue 35) ------------------------------------------------------
# A trajectory is max_turns replies of up to max_turn_tokens plus an observation after every reply but the last,
# all inside max_completion_length. Replies that cannot fit even with the smallest observations are a
# contradiction (refused); observations at agent.max_observation_bytes that cannot fit only warn, since terminal
# output is usually far shorter (an episode that does overflow ends on context_limit and is filtered).
MIN_OBSERVATION_TOKENS = 16  # the least a turn's observation adds: the protocol's output label and a prompt line
OBSERVATION_BYTES_PER_TOKEN = 4  # terminal text under a BPE tokenizer, for the warning's estimate


def trajectory_budget_problems(params: MTGRPOParams) -> list[str]:
    turns, reply = params.max_turns, params.max_turn_tokens
    need = turns * reply + (turns - 1) * MIN_OBSERVATION_TOKENS
    if need <= params.max_completion_length:
        return []
    fit = max(1, (params.max_completion_length + MIN_OBSERVATION_TOKENS) // (reply + MIN_OBSERVATION_TOKENS))
    return [(f"mt_grpo.max_turns x mt_grpo.max_turn_tokens ({turns} x {reply}) + {turns - 1} observations of at least "
            f"{MIN_OBSERVATION_TOKENS} tokens = {need} tokens, more than the trajectory budget "
            f"mt_grpo.max_completion_length ({params.max_completion_length}): every episode that uses its turns ends "
            f"on context_limit and filter_mode drops exactly those; lower max_turns (<= {fit} at this "
            "max_turn_tokens) or max_turn_tokens, or raise max_completion_length (and vllm_max_model_length)")]


def trajectory_budget_warning(params: MTGRPOParams, agent: AgentConfig) -> str | None:
    """None, or why long episodes will overflow: replies + observations at agent.max_observation_bytes."""
    obs = -(-int(agent.max_observation_bytes) // OBSERVATION_BYTES_PER_TOKEN)
    need = params.max_turns * params.max_turn_tokens + (params.max_turns - 1) * obs
    if need <= params.max_completion_length:
        return None
    return (f"mt_grpo: {params.max_turns} turns x {params.max_turn_tokens} tokens + {params.max_turns - 1} "
            f"observations at agent.max_observation_bytes ({agent.max_observation_bytes} B, ~{obs} tokens) = ~{need} "
            f"tokens > mt_grpo.max_completion_length ({params.max_completion_length}): episodes with long outputs "
            "end on context_limit (filtered)")


def check_first_prompts(params: MTGRPOParams, agent: AgentConfig, tasks: list, tokenizer,
                        screen: str = "root@termagent:/app# ") -> int:
    """Every task's first prompt (the agent's own rendering, chat template included) within
    mt_grpo.max_prompt_length; returns the longest. Refuses naming the key and the tasks over it."""
    from termagent.protocol.protocols import get_protocol

    protocol = get_protocol(agent.protocol, harbor_package=agent.harbor_package,
                            harbor_version=agent.harbor_version, max_observation_bytes=agent.max_observation_bytes)
    lengths = {}
    for task in tasks:
        ids = tokenizer.apply_chat_template(protocol.initial_messages(task.instruction, screen), tokenize=True,
                                            add_generation_prompt=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        lengths[task.id] = len(ids)
    over = {k: v for k, v in sorted(lengths.items(), key=lambda kv: -kv[1]) if v > params.max_prompt_length}
    if over:
        listed = ", ".join(f"{k} ({v})" for k, v in list(over.items())[:5])
        raise ValueError(f"mt_grpo.max_prompt_length ({params.max_prompt_length}) is shorter than the first prompt "
                         f"of {len(over)} task(s): {listed}{' ...' if len(over) > 5 else ''} tokens; raise it (and "
                         "vllm_max_model_length) or leave those tasks out")
    return max(lengths.values(), default=0)


# What mt_grpo_config sets itself: the typed fields of MTGRPOParams and these; the rest is `mt_grpo.trl`'s.
MT_GRPO_RESERVED = ("output_dir", "data_seed", "gradient_checkpointing_kwargs", "per_device_train_batch_size",
                    "steps_per_generation", "top_p", "top_k", "mask_truncated_completions", "num_iterations",
                    "shuffle_dataset", "disable_dropout", "log_completions", "lr_scheduler_type", "vllm_enable_sleep_mode")


@dataclass
class MTGRPOParams:
    # training (docs/design.md#the-gpu-configuration: dr_grpo, scale_rewards none, temperature 1.0)
    max_steps: int = 12  # optimizer steps; each is one rollout batch
    num_generations: int = 4  # trajectories per task (the group)
    tasks_per_step: int = 2  # groups per step: the batch is tasks_per_step x num_generations trajectories
    gradient_accumulation_steps: int = 1  # rollout batches per optimizer step
    # memory (termagent/train/memory.py plans it before loading): the rollout batch is trained in micro-batches of
    # this many trajectories (gradient accumulation inside the step; TRL's steps_per_generation), the old-logprob
    # pass is chunked the same way; 0: the whole rollout batch at once
    micro_batch_size: int = 1
    gradient_checkpointing: bool = True  # on CUDA only (training_kwargs): one 9k-token trajectory, 34 vs 121 GiB
    max_prompt_length: int = 2048  # the first prompt's budget in the memory plan and vLLM's max_model_len
    temperature: float = 0.7  # a 135 M model at 1.0 rarely finishes a multi-turn episode (the H100 profile: 1.0)
    scale_rewards: Literal["none", "group", "batch"] = "none"  # the turn advantages are scaled the same way
    # TRL's own knobs, straight into trl.GRPOConfig (beta 0: no reference model)
    trl: dict[str, Any] = field(default_factory=lambda: {
        "learning_rate": 1e-4, "beta": 0.0, "loss_type": "dr_grpo"},
        metadata=trl_knobs("GRPOConfig", MT_GRPO_RESERVED))
    max_completion_length: int = 4096  # the whole trajectory budget: every turn + environment tokens
    seed: int = 0
    lora: LoraParams = field(default_factory=LoraParams)  # only when no start adapter is given
    # rollouts (the agent: section gives everything else: observation size, pane, deadline margin)
    max_turns: int = 6  # model calls per episode
    max_turn_tokens: int = 192  # per-call cap (max_tokens of each turn)
    concurrency: int = 8  # trials of a rollout batch at once (their calls are batched)
    filter_mode: Literal["exclude", "zero"] = "exclude"  # turn cap / timeout / context limit: see module doc
    # a rollout batch without outcome signal (every group ties) trains nothing and takes no optimizer step
    skip_without_signal: bool = True
    credit: TurnCreditParams = field(default_factory=TurnCreditParams)
    # generation: the trainer's own vLLM engine on a GPU (termagent.policy.trl_vllm), one training process
    use_vllm: bool = False  # H100: vLLM; CPU: the in-process model (params.yaml sets false)
    vllm_mode: Literal["colocate", "server"] = "colocate"
    vllm_gpu_memory_utilization: float = 0.3  # the rest is the trainer's
    vllm_importance_sampling_mode: str = "token_truncate"  # sequence_mask drops long trajectories wholesale (#4772)
    vllm_max_model_length: int = 10240  # >= max_prompt_length + max_completion_length (checked)

    def __post_init__(self):
        problems = []
        if self.num_generations < 2:
            problems.append(f"num_generations must be >= 2 (a group needs company), got {self.num_generations}")
        if self.filter_mode not in ("exclude", "zero"):
            problems.append(f"filter_mode must be 'exclude' or 'zero', got {self.filter_mode!r}")
        if self.max_turn_tokens > self.max_completion_length:
            problems.append("max_turn_tokens must not exceed max_completion_length (the trajectory budget)")
        batch = self.tasks_per_step * self.num_generations
        if self.micro_batch_size < 0 or (self.micro_batch_size and batch % self.micro_batch_size):
            problems.append(f"micro_batch_size ({self.micro_batch_size}) must divide tasks_per_step x "
                            f"num_generations ({batch}), or be 0 (the whole batch)")
        if self.use_vllm and self.vllm_max_model_length < self.max_prompt_length + self.max_completion_length:
            problems.append(f"vllm_max_model_length ({self.vllm_max_model_length}) must hold max_prompt_length + "
                            f"max_completion_length ({self.max_prompt_length + self.max_completion_length})")
        problems += trajectory_budget_problems(self)
        if problems:
            raise ValueError("mt_grpo: " + "; ".join(problems))

    def agent_config(self, agent: AgentConfig) -> AgentConfig:
        """The eval agent's settings with the RL ones: no summarisation, unseeded sampling at `temperature`."""
        from dataclasses import replace

        return replace(agent, max_turns=self.max_turns, max_output_tokens=self.max_turn_tokens,
                       temperature=self.temperature, seed=None, context_limit=None, context_strategy="end",
                       min_free_tokens=None)


# -- one trajectory -------------------------------------------------------------------------------------
def trajectory_status(trial: dict) -> str:
    """kept | max_turns | timeout | context_limit | infra."""
    episode = trial.get("agent_result") or {}
    error = trial.get("error") or {}
    if error.get("class") == "AgentTimeoutError":
        return "timeout"  # graded by the sandbox (reward 0), filtered here
    if trial.get("reward") is None or not episode or episode.get("ended_by") in (None, "error"):
        return "infra"
    return FILTERED_ENDINGS.get(episode["ended_by"], "kept")


def turn_signals(episode: dict, n_spans: int) -> tuple[list[bool], list[bool], list[int | None]]:
    """(exec_ok, format_ok, exec_rc) per model call, aligned with the token buffer's spans."""
    turns = [t for t in (episode.get("turns") or []) if t.get("completion_ids") is not None]
    if len(turns) != n_spans:
        raise RuntimeError(f"episode {episode.get('task_id')}: {len(turns)} recorded generations for "
                           f"{n_spans} token spans")
    rcs = [t.get("rc") for t in turns]
    return [rc == 0 for rc in rcs], [bool(t.get("parse_ok")) for t in turns], rcs


def rollout_row(trial: dict, buffer, *, filter_mode: str, fallback_prompt_ids: list[int], eos_id: int,
                verdict: float | None = None) -> dict:
    """One row of rollout_func's output (before grouping): ids, masks, outcome, per-turn signals. `verdict`: a
    synthetic verdict on the trajectory's tokens (termagent.rewards.synthetic) in the verifier's place; it judges
    the tokens whatever the ending, so only infrastructure failures are filtered."""
    status = trajectory_status(trial)
    episode = trial.get("agent_result") or {}
    spans = [t.span for t in buffer.turns]
    excluded = status == "infra" or (status != "kept" and filter_mode == "exclude" and verdict is None)
    if spans and episode and status != "infra":
        exec_ok, format_ok, rcs = turn_signals(episode, len(spans))
    elif spans:
        # no record of the turns matches the buffer: filter_mode "zero" and the agent timeout struck during a model
        # call (the runner abandoned the agent thread; only the buffer's spans survive), or an infrastructure
        # failure (excluded), whose record may stop short of the buffer (T1-MT on SmolLM2 raised here: 0 recorded
        # turns for 1 span). Each turn scores 0: no command is known to have run, no reply to have parsed.
        exec_ok, format_ok, rcs = [False] * len(spans), [False] * len(spans), [None] * len(spans)
    else:
        exec_ok, format_ok, rcs = [], [], []
    if buffer.prompt_ids:
        prompt_ids, completion_ids = list(buffer.prompt_ids), list(buffer.completion_ids)
        env_mask, logprobs = list(buffer.env_mask), list(buffer.logprobs)
    else:  # nothing was generated (the episode failed before its first call): a placeholder, no loss
        prompt_ids, completion_ids, env_mask, logprobs = list(fallback_prompt_ids), [eos_id], [0], [0.0]
    verifier_reward = trial.get("reward") if verdict is None else verdict
    if excluded:
        outcome = None
        env_mask = [0] * len(completion_ids)
    elif verdict is not None:
        outcome = float(verdict)
    elif status != "kept":
        outcome = 0.0
    else:
        outcome = float(trial["reward"])
    return {
        "prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs, "env_mask": env_mask,
        "outcome": outcome, "status": status, "turn_spans": [list(s) for s in spans], "turn_exec_ok": exec_ok,
        "turn_format_ok": format_ok, "turn_exec_rc": rcs, "drift": [t.drift for t in buffer.turns],
        "drift_at": [t.drift_at for t in buffer.turns], "verifier_reward": verifier_reward,
        "task_id": trial["task_id"], "ended_by": episode.get("ended_by"),
        "prompt_messages": (episode.get("turns") or [{}])[0].get("messages_in") or [],
        "turn_completions": [t.get("completion") or "" for t in (episode.get("turns") or [])
                        if t.get("completion_ids") is not None],
        "durations": {k: round(v, 3) for k, v in (trial.get("timings") or {}).items() if isinstance(v, float)},
    }


# -- advantages -----------------------------------------------------------------------------------------
def token_advantages(rows: list[dict], outcome_advantages: list[float], *, num_generations: int, seq_len: int,
                     params: MTGRPOParams) -> tuple[list[list[float]], list[list[float] | None]]:
    """(B, seq_len) token advantages for rows in group order (contiguous blocks of num_generations), and
    each row's turn advantages (None for excluded rows). Excluded rows (outcome None) get zeros."""
    credit = params.credit
    scale = params.scale_rewards != "none"
    out: list[list[float]] = []
    turn_advs: list[list[float] | None] = []
    for g in range(0, len(rows), num_generations):
        group = rows[g : g + num_generations]
        scored = [i for i, r in enumerate(group) if r["outcome"] is not None]
        rewards = [compute_turn_rewards(group[i]["outcome"], group[i]["turn_exec_ok"], group[i]["turn_format_ok"],
                                        max_turns=params.max_turns, gamma=credit.turn_gamma,
                                        w_outcome=credit.w_outcome, w_exec=credit.w_exec, w_format=credit.w_format,
                                        w_efficiency=credit.w_efficiency) for i in scored]
        advs = dict(zip(scored, compute_turn_advantages(rewards, scale=scale)))
        for i, row in enumerate(group):
            if i not in advs:
                out.append([0.0] * seq_len)
                turn_advs.append(None)
                continue
            spans = [tuple(s) for s in row["turn_spans"]]
            out.append(map_turn_advantages_to_tokens(advs[i], outcome_advantages[g + i], spans, seq_len,
                                                     alpha=credit.alpha))
            turn_advs.append(advs[i])
    return out, turn_advs


# -- rollouts -------------------------------------------------------------------------------------------
class MultiTurnRollout:
    """TRL `rollout_func`: `(prompts, trainer) -> {prompt_ids, completion_ids, logprobs, env_mask, ...}`,
    one row per received prompt, in order. Task ids come from the rows the trainer stashed."""

    def __init__(self, sandbox, tasks: dict[str, Any], params: MTGRPOParams, agent: AgentConfig, verdict=None):
        self.sandbox = sandbox
        self.tasks = tasks
        self.params = params
        self.verdict = verdict  # termagent.rewards.synthetic: judges each trajectory's mean tokens per model turn
        self.agent = params.agent_config(agent)
        from termagent.protocol.protocols import protocol_for

        protocol_for(self.agent)  # a missing Harbor package (agent.protocol) stops here, not in every rollout
        self.calls = 0
        self.last_stats: dict[str, Any] = {}

    def __call__(self, prompts: list, trainer) -> dict[str, list]:
        from termagent.agent.loop import TerminusAgent
        from termagent.policy.batching import BatchingPolicy
        from termagent.policy.hf import HFPolicy
        from termagent.sandbox import run_trials
        from termagent.train.tito import ChatSuffix, TokenBufferPolicy

        inputs = getattr(trainer, "_rollout_inputs", None)
        if inputs is None or len(inputs) != len(prompts):
            raise RuntimeError("mt_grpo: rollout_func needs the trainer's rows (MTGRPOTrainer stashes them)")
        task_ids = [row["task_id"] for row in inputs]
        missing = sorted({t for t in task_ids if t not in self.tasks})
        if missing:
            raise KeyError(f"mt_grpo: tasks not in the task list: {missing}")

        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        was_training = model.training
        model.eval()
        hf = HFPolicy.from_model(model, tokenizer, name="mt_grpo", max_batch=max(1, self.params.concurrency))
        backend = hf
        if getattr(trainer, "use_vllm", False):
            from termagent.policy.trl_vllm import TRLvLLMPolicy

            # the trainer's engine, its weights pushed by TRL before this call; `hf` only tokenises
            backend = TRLvLLMPolicy(trainer.vllm_generation, hf, name="mt_grpo")
        # a group's episodes start their containers seconds apart: a wider gather window lets their first calls
        # meet (measured: with 50 ms the two episodes of a group never shared a batch), then they stay in step
        shared = BatchingPolicy(backend, max_batch=self.params.concurrency, gather_s=1.0)
        suffix = ChatSuffix.from_tokenizer(tokenizer)
        buffers = [TokenBufferPolicy(base=shared, suffix=suffix, eos_ids=hf.eos_ids, name="mt_grpo",
                                     max_completion_tokens=trainer.args.max_completion_length)
                   for _ in task_ids]
        base_attempt = self.calls * len(task_ids)  # unique container labels across steps
        specs = [(self.tasks[t], TerminusAgent(buffer, self.agent), base_attempt + i)
                 for i, (t, buffer) in enumerate(zip(task_ids, buffers))]
        started = time.monotonic()
        try:
            results = run_trials(self.sandbox, specs, concurrency=self.params.concurrency,
                                 description="mt_grpo rollouts")
        finally:
            shared.close()  # stops its worker thread (the model itself stays: HFPolicy.close drops a reference)
            model.train(was_training)
        wall = time.monotonic() - started
        self.calls += 1
        self.last_results = [r.to_dict() for r in results]  # the episode records of the last batch
        eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else hf.eos_ids[0]
        verdicts = [None] * len(buffers)
        if self.verdict is not None:
            verdicts = self.verdict([tokens_per_turn(buffer) for buffer in buffers], keys=task_ids)
        rows = []
        for task_id, result, buffer, verdict in zip(task_ids, results, buffers, verdicts):
            fallback = hf.prompt_ids([{"role": "user", "content": self.tasks[task_id].instruction}])
            rows.append(rollout_row(result.to_dict(), buffer, filter_mode=self.params.filter_mode,
                                    fallback_prompt_ids=fallback, eos_id=eos_id, verdict=verdict))
        self.last_stats = {"rollout_wall_s": wall, "batches": shared.stats["batches"],
                           "mean_rows_per_batch": shared.stats["rows"] / max(1, shared.stats["batches"]),
                           # tokens vLLM gave no logprob for (None: importance ratio 1, termagent.policy.trl_vllm)
                           "unscored_logprobs": float(sum(lp is None for row in rows for lp in row["logprobs"]))}
        self.last_rows = rows
        return {key: [row[key] for row in rows] for key in rows[0]}


def tokens_per_turn(buffer) -> float:
    """A trajectory's sampled tokens per model turn (0 when the model was never called)."""
    spans = [t.span for t in buffer.turns]
    return sum(end - start for start, end in spans) / len(spans) if spans else 0.0


def outcome_reward(prompts=None, completions=None, outcome=None, **_) -> list[float | None]:
    """The verifier's reward as rollout_func computed it (None: excluded from the group statistics)."""
    return list(outcome)


# -- trainer --------------------------------------------------------------------------------------------
def make_trainer_class():
    from trl import GRPOTrainer

    class MTGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose advantages are (B, T): outcome + turn-level credit per token (module doc)."""

        def __init__(self, *args, mt_params: MTGRPOParams, rollouts_dir: Path | None = None, **kwargs):
            self.mt_params = mt_params
            self.rollouts_dir = Path(rollouts_dir) if rollouts_dir else None
            self._step_started = time.monotonic()
            super().__init__(*args, **kwargs)
            # no optimizer step on a batch whose groups all tie on the outcome (termagent/train/signal_gate.py):
            # the turn credit alone (format, exit codes) says nothing about solving
            self.gate = SignalGate(mt_params.skip_without_signal, beta=self.beta)
            self.add_callback(make_gate_callback(self.gate))

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.gate.skip_loss():
                return zero_loss(model)
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        def _generate_and_score_completions(self, inputs):
            from accelerate.utils import gather_object

            self._rollout_inputs = inputs  # rollout_func reads the task ids from here
            t0 = time.monotonic()
            out = super()._generate_and_score_completions(inputs)
            self.gate.observe(self.accelerator, out["advantages"])  # TRL's advantages: the outcome's alone
            keys = ("outcome", "status", "turn_spans", "turn_exec_ok", "turn_format_ok", "turn_exec_rc", "drift",
                    "drift_at", "verifier_reward", "task_id", "ended_by", "durations", "prompt_messages", "turn_completions")
            local = [{k: row.get(k) for k in keys} for row in inputs]
            rows = gather_object(local)
            outcome_adv = gather_object(out["advantages"].tolist())
            seq_len = out["completion_ids"].shape[1]
            num_generations = self.num_generations
            all_adv, turn_advs = token_advantages(rows, outcome_adv, num_generations=num_generations,
                                                  seq_len=seq_len, params=self.mt_params)
            rank = self.accelerator.process_index
            part = slice(rank * len(inputs), (rank + 1) * len(inputs))
            out["advantages"] = torch.tensor(all_adv[part], dtype=torch.float32, device=out["completion_ids"].device)
            self._log_mt(rows, outcome_adv, turn_advs, time.monotonic() - t0)
            return out

        def _log_mt(self, rows, outcome_adv, turn_advs, wall_s):
            n = len(rows)
            statuses = [r["status"] for r in rows]
            filtered = sum(s not in ("kept", "infra") for s in statuses) / n
            infra = statuses.count("infra") / n
            drift = sum(d == "drift" for r in rows for d in r["drift"])
            clean = sum(d == "clean" for r in rows for d in r["drift"])
            turns = [len(r["turn_spans"]) for r in rows]
            metrics = self._metrics["train"]
            metrics["mt/filtered_frac"].append(filtered)
            metrics["mt/infra_frac"].append(infra)
            metrics["mt/drift_turns"].append(float(drift))
            metrics["mt/clean_turns"].append(float(clean))
            metrics["mt/mean_turns"].append(sum(turns) / n)
            metrics["mt/format_valid_rate"].append(
                sum(sum(r["turn_format_ok"]) for r in rows) / max(1, sum(turns)))
            signal, nonzero = signal_groups(rows, self.num_generations)
            metrics["mt/signal_groups_frac"].append(signal)
            metrics["mt/outcome_nonzero_groups_frac"].append(nonzero)
            rollout = getattr(self.rollout_func, "last_stats", {})
            for key in ("rollout_wall_s", "mean_rows_per_batch", "unscored_logprobs"):
                if key in rollout:
                    metrics[f"mt/{key}"].append(float(rollout[key]))
            skipped = self.gate.enabled and not self.gate.batch_signal  # this batch trains nothing
            metrics["mt/skipped_batch"].append(float(skipped))
            self.last_mt_stats = {"filtered_frac": filtered, "infra_frac": infra, "drift_turns": drift,
                                  "clean_turns": clean, "mean_turns": sum(turns) / n, "skipped": skipped, **rollout}
            if self.rollouts_dir is not None and self.accelerator.is_main_process:
                write_rollout_logs(self.rollouts_dir, rows, outcome_adv, turn_advs, step=self.state.global_step,
                                   num_generations=self.num_generations, stats=self.last_mt_stats, wall_s=wall_s)

    return MTGRPOTrainer


def signal_groups(rows: list[dict], num_generations: int) -> tuple[float, float]:
    """(share of groups holding a verified pass and a fail among their scored trajectories, share of groups whose
    outcome reward is non-zero somewhere): the outcome's signal in a rollout batch."""
    signal = nonzero = n = 0
    for g in range(0, len(rows), num_generations):
        scored = [r for r in rows[g: g + num_generations] if r["outcome"] is not None]
        passes = sum((r["verifier_reward"] or 0.0) >= 1.0 for r in scored)
        signal += 0 < passes < len(scored)
        nonzero += any(r["outcome"] for r in scored)
        n += 1
    return (round(signal / n, 4), round(nonzero / n, 4)) if n else (0.0, 0.0)


def write_rollout_logs(out_dir: Path, rows: list[dict], outcome_adv: list[float], turn_advs, *, step: int,
                       num_generations: int, stats: dict, wall_s: float) -> None:
    """rollouts.jsonl (one line per trajectory, with turn_info) and steps.jsonl (one line per step)."""
    from termagent.rollouts import JsonlAppender

    def std(values: list[float]) -> float:
        if len(values) < 2:
            return 0.0
        mean = sum(values) / len(values)
        return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))

    records, group_stds = [], []
    for g in range(0, len(rows), num_generations):
        group = rows[g : g + num_generations]
        scored = [r["outcome"] for r in group if r["outcome"] is not None]
        group_stds.append(std(scored))
    frac_zero = sum(s == 0.0 for s in group_stds) / max(1, len(group_stds))
    signal, outcome_nonzero = signal_groups(rows, num_generations)
    for i, row in enumerate(rows):
        n_turns = len(row["turn_spans"])
        valid = sum(row["turn_format_ok"])
        records.append({
            "task_id": row["task_id"], "training_step": step, "prompt": row["prompt_messages"],
            "completion": row["turn_completions"][-1] if row["turn_completions"] else "", "completions": row["turn_completions"],
            "format_reward": valid / n_turns if n_turns else 0.0,
            "script_reward": sum(row["turn_exec_ok"]) / n_turns if n_turns else 0.0,
            "verifier_reward": row["verifier_reward"] if row["verifier_reward"] is not None else 0.0,
            "reward": row["outcome"] if row["outcome"] is not None else 0.0,
            "step_reward_std": group_stds[i // num_generations], "step_frac_zero_std": frac_zero,
            "exec_rc": row["turn_exec_rc"][-1] if row["turn_exec_rc"] else None, "durations": row["durations"],
            "status": row["status"], "ended_by": row["ended_by"], "excluded": row["outcome"] is None,
            "outcome_advantage": outcome_adv[i], "turn_advantages": turn_advs[i],
            "turn_info": [{"exec_rc": rc, "format_valid": ok, "token_span": list(span), "drift": d}
                          for rc, ok, span, d in zip(row["turn_exec_rc"], row["turn_format_ok"], row["turn_spans"],
                                                     row["drift"])],
        })
    scored = [r["outcome"] for r in rows if r["outcome"] is not None]
    all_turns = sum(len(r["turn_spans"]) for r in rows)
    step_record = {
        "training_step": step, "n_completions": len(rows),
        "reward_mean": sum(scored) / len(scored) if scored else 0.0, "reward_std": std(scored),
        "frac_zero_std": frac_zero,
        "signal_groups_frac": signal, "outcome_nonzero_groups_frac": outcome_nonzero,
        "format_valid_rate": sum(sum(r["turn_format_ok"]) for r in rows) / max(1, all_turns),
        "verifier_pass_rate": sum((r["verifier_reward"] or 0.0) >= 1.0 for r in rows) / len(rows),
        "wall_s": round(wall_s, 3), **{k: v for k, v in stats.items() if isinstance(v, (int, float))},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    with JsonlAppender(out_dir / "rollouts.jsonl") as w:
        w.write_batch(records)
    with JsonlAppender(out_dir / "steps.jsonl") as w:
        w.write(step_record)


# -- the stage's work -------------------------------------------------------------------------------------
def load_task_list(path: str | Path, index_path: str | Path = "data/tasks.json") -> list:
    """The tasks named by a task list (the curate stage's {"task_ids": [...]} or a plain list of ids),
    loaded from the index; every one must be a `train` task (training never reads held-out tasks)."""
    import json

    from termagent.tasks.index import tasks_in_split

    data = json.loads(Path(path).read_text())
    ids = data.get("task_ids") if isinstance(data, dict) else data
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{path}: expected a non-empty list of task ids (or {{\"task_ids\": [...]}})")
    train = {t.id: t for t in tasks_in_split(index_path, "train")}
    unknown = [i for i in ids if i not in train]
    if unknown:
        raise ValueError(f"{path}: not train tasks of {index_path}: {unknown}")
    return [train[i] for i in ids]


def mt_grpo_config(params: MTGRPOParams, work_dir: str | Path):
    """The GRPOConfig of an MT-GRPO run: one rollout batch (tasks_per_step x num_generations trajectories) per
    `gradient_accumulation_steps`-th of an optimizer step, trained in micro-batches of `micro_batch_size`."""
    import os

    from trl import GRPOConfig

    from termagent.train.common import training_kwargs, vllm_kwargs

    # sleep mode off: TRL would reload the weights on every turn's call (RESEARCH-training.md §1.6)
    vllm = vllm_kwargs("mt_grpo", use_vllm=params.use_vllm, mode=params.vllm_mode,
                       gpu_memory_utilization=params.vllm_gpu_memory_utilization,
                       importance_sampling_mode=params.vllm_importance_sampling_mode,
                       max_model_length=params.vllm_max_model_length)
    if vllm["use_vllm"] and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise RuntimeError("mt_grpo: vLLM rollouts run in one training process only (the engine's generate is a "
                           "collective and episodes end at different turns); run mt_grpo on one GPU, or set "
                           "mt_grpo.use_vllm: false (termagent/policy/trl_vllm.py)")
    batch = params.tasks_per_step * params.num_generations
    micro = params.micro_batch_size or batch
    micro_steps = batch // micro  # one rollout batch = micro_steps forward/backward passes of `micro` trajectories
    return GRPOConfig(**training_kwargs(
        output_dir=str(work_dir), seed=params.seed, gradient_checkpointing=params.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        max_steps=params.max_steps, per_device_train_batch_size=micro, steps_per_generation=micro_steps,
        gradient_accumulation_steps=micro_steps * params.gradient_accumulation_steps,
        num_generations=params.num_generations, temperature=params.temperature, top_p=1.0, top_k=0,
        scale_rewards=params.scale_rewards, max_completion_length=params.max_completion_length,
        mask_truncated_completions=False, num_iterations=1, shuffle_dataset=True, disable_dropout=True,
        log_completions=False, lr_scheduler_type="constant", **vllm, **params.trl))


def build_trainer(params: MTGRPOParams, agent: AgentConfig, sandbox, tasks: list, *, model_dir: str | Path,
                  start_adapter: str | Path | None, work_dir: str | Path, rollouts_dir: str | Path | None,
                  metrics_dir: str | Path | None, trainer_cls=None, verdict=None):
    """The MTGRPOTrainer, ready to train: policy = base (+ the start adapter, trainable), dataset = the task
    list repeated to cover max_steps, rollout_func = MultiTurnRollout. `verdict`: a synthetic verifiable reward
    (termagent.rewards.synthetic) in the verifier's place, and the whole reward: the turn credit keeps only its
    outcome term (the reward-following tests, scripts/bench_learns.py)."""
    from dataclasses import replace

    from datasets import Dataset

    from termagent.train.common import dvclive_callback, load_model, load_tokenizer, seed_everything

    if verdict is not None:  # the verdict is the whole reward: no turn credit for format, exit codes or brevity
        params = replace(params, credit=replace(params.credit, w_exec=0.0, w_format=0.0, w_efficiency=0.0))
    config = mt_grpo_config(params, work_dir)
    seed_everything(params.seed)
    check_memory(params, model_dir)
    tokenizer = load_tokenizer(model_dir)
    check_first_prompts(params, agent, tasks, tokenizer)  # before the model loads
    model = load_model(model_dir, start_adapter, trainable=True) if start_adapter else load_model(model_dir)
    # every row names its task; the prompt text is only a label (the agent renders the real first prompt)
    rows = [{"prompt": t.id, "task_id": t.id} for t in tasks]
    needed = params.max_steps * params.gradient_accumulation_steps * params.tasks_per_step
    dataset = Dataset.from_list((rows * (needed // len(rows) + 1))[: max(needed, len(rows))])
    cls = trainer_cls or make_trainer_class()
    callbacks = [dvclive_callback(metrics_dir)] if metrics_dir else []
    return cls(model=model, processing_class=tokenizer, args=config, train_dataset=dataset,
               reward_funcs=[outcome_reward], rollout_func=MultiTurnRollout(sandbox, {t.id: t for t in tasks},
                                                                          params, agent, verdict=verdict),
               peft_config=None if start_adapter else params.lora.to_peft(), callbacks=callbacks,
               mt_params=params, rollouts_dir=rollouts_dir)


def check_memory(params: MTGRPOParams, model_dir: str | Path) -> None:
    """On a GPU, refuse (before loading anything) a configuration the memory plan says cannot fit."""
    from dataclasses import asdict

    from termagent.train import memory

    gpu = memory.gpu_total_bytes()
    if gpu is None:
        return
    shape = memory.ModelShape.from_dir(model_dir)
    p = memory.mt_grpo_plan(asdict(params), shape, gpu)  # micro_batch_size 0: the whole rollout batch
    log.info("mt_grpo memory plan: %s", p.as_dict())
    memory.require_fits(p, knobs="mt_grpo.micro_batch_size, max_completion_length, max_prompt_length or "
                        "vllm_gpu_memory_utilization (or turn gradient_checkpointing on)")


def train_mt_grpo(params: MTGRPOParams, agent: AgentConfig, sandbox, tasks: list, *, model_dir: str | Path,
                  start_adapter: str | Path | None, out_dir: str | Path, rollouts_dir: str | Path,
                  metrics_dir: str | Path, engine=None, verdict=None) -> dict:
    """Train, save models/mt_grpo (PEFT adapter + tokenizer), write metrics/<stage>/train.json. Returns it.
    `engine`: EngineConfig, whose `rl` generates on the OpenVINO engine (termagent.train.engine_rollouts);
    `verdict`: a synthetic verifiable reward (termagent.rewards.synthetic) that replaces the outcome."""
    import json
    import shutil
    import tempfile

    from termagent.train.common import StageTimer, save_adapter, stage_metrics_doc, write_stage_metrics

    timer = StageTimer()
    if warning := trajectory_budget_warning(params, agent):
        log.warning(warning)
    rollouts_dir = Path(rollouts_dir)
    for name in ("rollouts.jsonl", "steps.jsonl"):  # a rerun of the stage starts its logs afresh
        (rollouts_dir / name).unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mt_grpo-"))
    engine_policy = None
    try:
        with timer.phase("setup"):
            trainer = build_trainer(params, agent, sandbox, tasks, model_dir=model_dir, start_adapter=start_adapter,
                                    work_dir=work, rollouts_dir=rollouts_dir, metrics_dir=metrics_dir,
                                    verdict=verdict)
            from termagent.train.engine_rollouts import engine_for

            engine_policy = engine_for(trainer, engine, model_dir)
        with timer.phase("train"):
            result = trainer.train()
        with timer.phase("save"):
            save_adapter(trainer.model, trainer.processing_class, out_dir,
                         manifest={"stage": "mt_grpo", "base": str(model_dir), "start_adapter": str(start_adapter or ""),
                                   "steps": trainer.state.global_step})
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if engine_policy is not None:
            engine_policy.close()
    history = [h for h in trainer.state.log_history if "loss" in h]
    steps = [json.loads(line) for line in (rollouts_dir / "steps.jsonl").read_text().splitlines() if line.strip()]
    metrics = {"steps": trainer.state.global_step, "train_loss": result.training_loss,
               "skipped_steps": trainer.gate.skipped,
               "step_wall_s": [s["wall_s"] for s in steps], "filtered_frac": [s.get("filtered_frac") for s in steps],
               "drift_turns": sum(s.get("drift_turns", 0) for s in steps),
               "clean_turns": sum(s.get("clean_turns", 0) for s in steps),
               "reward_mean": [s["reward_mean"] for s in steps],
               "signal_groups_frac": [s.get("signal_groups_frac") for s in steps],
               "outcome_nonzero_groups_frac": [s.get("outcome_nonzero_groups_frac") for s in steps],
               "verifier_pass_rate": [s.get("verifier_pass_rate") for s in steps],
               "log_history": history, "params": params}
    write_stage_metrics(Path(metrics_dir) / "train.json", "mt_grpo", timer, **metrics)  # main process only
    return stage_metrics_doc("mt_grpo", timer, **metrics)

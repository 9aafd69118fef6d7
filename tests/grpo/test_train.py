"""Real GRPO steps (TRL GRPOTrainer, PEFT LoRA, the tiny model on CPU) against real containers: steps without
signal are skipped and counted, every completion and step is logged with the fields of docs/design.md#rollouts, the prompt TRL
tokenizes is the eval policy's, and the datasets stage builds its six files from those rollouts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from termagent.rewards import RewardWeights
from termagent.rollouts import iter_jsonl, iter_rollouts
from termagent.train.grpo import GRPOParams, GRPOPaths, train_grpo
from termagent.train.single_turn import EnvConfig

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]

ROLLOUT_FIELDS = {"task_id", "training_step", "prompt", "completion", "format_reward", "script_reward",
                  "verifier_reward", "reward", "step_reward_std", "step_frac_zero_std", "exec_rc", "durations"}


def small_config(**kw) -> GRPOParams:
    # The warm tiny model at temperature 1 with the shaped reward (format + script + pytest partial credit): its
    # groups then carry a reward std on most steps, so two steps are enough to move the adapter. The embedded
    # default (outcome only, 0.7) is trained where the rates say a group holds a pass and a fail.
    base = {"use_vllm": False, "num_generations": 4, "per_device_train_batch_size": 4, "temperature": 1.0,
            "max_resamples": 0,  # dynamic sampling: tests/grpo/test_resample.py
            "reward": RewardWeights(format=0.05, script=0.10, verifier=0.85, partial_credit=True),
            "gradient_accumulation_steps": 2, "max_steps": 2, "max_completion_length": 48, "concurrency": 4,
            "max_prompt_length": 4096, "trl": {**GRPOParams().trl, "learning_rate": 5e-4, "save_steps": 1, "beta": 0.005}}  # beta > 0: kl is logged
    return GRPOParams(**(base | kw))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, warm_model_dir, warm_adapter, tasks, grpo_sandbox):
    root = tmp_path_factory.mktemp("grpo-run")
    paths = GRPOPaths(warmup=warm_adapter, out=root / "models/grpo",
                      rollouts_dir=root / "rollouts", checkpoints=root / "ckpt", metrics_dir=root / "metrics")
    metrics = train_grpo(small_config(), paths, tasks=tasks, sandbox=grpo_sandbox, env_config=EnvConfig(),
                         progress=False)
    return paths, metrics


def test_steps_carry_signal(trained):
    """Two steps with groups that carry signal, every step trained (none skipped by the signal gate). Whether the
    steps move the policy *toward* the reward is tests/grpo/test_learns.py's claim (opposite synthetic arms)."""
    paths, m = trained
    print("grpo signal:", {k: m[k] for k in ("valid_json_rate", "script_ok_rate", "verifier_pass_rate", "reward_mean",
                                             "groups", "groups_nonzero_std", "adapter_delta_l2", "seconds_per_step")},
          json.loads((paths.metrics_dir / "timing.json").read_text())["mean_s"])  # shown with pytest -s
    assert m["steps"] == 2
    steps = list(iter_jsonl(paths.rollouts_dir / "steps.jsonl"))
    assert m["skipped_steps"] == sum(s["skipped"] for s in steps) == sum(s["frac_zero_std"] == 1.0 for s in steps)
    assert m["valid_json_rate"] > 0
    assert 0 < m["verifier_pass_rate"] < 1
    assert m["groups_nonzero_std"] > 0
    assert m["n_infra_failures"] == 0
    assert (paths.out / "adapter_config.json").is_file() and (paths.out / "tokenizer.json").is_file()


def test_rollouts_and_steps_logged(trained):
    paths, _ = trained
    rows = list(iter_rollouts(paths.rollouts_dir / "rollouts.jsonl"))
    assert len(rows) == 2 * 8 and {r["training_step"] for r in rows} == {0, 1}
    for r in rows:
        assert ROLLOUT_FIELDS <= set(r)
        assert r["prompt"][0]["role"] == "user" and len(r["prompt"]) == 1
    # A group (training_step, task) holds num_generations rows that share step_reward_std.
    groups = {}
    for r in rows:
        groups.setdefault((r["training_step"], r["task_id"]), set()).add(round(r["step_reward_std"], 9))
    assert all(len(v) == 1 for v in groups.values())
    steps = list(iter_jsonl(paths.rollouts_dir / "steps.jsonl"))
    assert [s["training_step"] for s in steps] == [0, 1]
    assert all(s["n_completions"] == 8 and s["timings"]["generate"] > 0 for s in steps)
    timing = json.loads((paths.metrics_dir / "timing.json").read_text())
    assert {"step", "generate", "score", "backward", "verify", "container_wait"} <= set(timing["mean_s"])
    # Curves: TRL's metrics and ours through dvclive, PNGs rendered.
    live = paths.metrics_dir / "dvclive" / "plots" / "metrics"
    names = {p.relative_to(live).with_suffix("").as_posix() for p in live.rglob("*.tsv")}
    for name in ("reward", "reward_rolling_mean", "reward_rolling_lo", "reward_rolling_hi", "kl", "entropy",
                 "loss", "grad_norm", "learning_rate", "frac_reward_zero_std", "rewards/format/mean",
                 "rewards/script/mean", "rewards/verifier/mean", "completions/mean_length", "time/generate_s",
                 "time/backward_s", "time/verify_s"):
        assert name in names, f"{name} not logged (have {sorted(names)})"
    assert (paths.metrics_dir / "curves.png").stat().st_size > 0
    assert (paths.metrics_dir / "reward.png").stat().st_size > 0
    hist = json.loads((paths.metrics_dir / "reward_distribution.json").read_text())
    assert sum(b["count"] for b in hist) == len([r for r in rows if r["reward"] is not None])


def test_adapter_loads_and_generates(trained, warm_model_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    paths, _ = trained
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(warm_model_dir)), str(paths.out))
    tok = AutoTokenizer.from_pretrained(str(paths.out))
    ids = tok("hello", return_tensors="pt")["input_ids"]
    assert model.generate(ids, max_new_tokens=4, do_sample=False).shape[1] > ids.shape[1]


def test_trl_prompt_tokens_are_the_eval_policys(warm_model_dir, warm_adapter, tasks, grpo_sandbox):
    """The token ids TRL generates from are the ones the eval loop's hf policy sends for the same message."""
    from trl import GRPOConfig, GRPOTrainer

    from termagent.policy.hf import HFPolicy
    from termagent.train.common import load_model, load_tokenizer
    from termagent.train.single_turn import SingleTurnEnv

    env = SingleTurnEnv(grpo_sandbox, tasks)
    env.probe_screens(progress=False)
    prompt = env.prompt(tasks[0].id)
    policy = HFPolicy(warm_model_dir, adapter=warm_adapter, device="cpu")
    from datasets import Dataset

    trainer = GRPOTrainer(model=load_model(warm_model_dir, warm_adapter), processing_class=load_tokenizer(warm_model_dir),
                          reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                          args=GRPOConfig(output_dir="/tmp/unused-grpo", use_cpu=True, bf16=False, beta=0.0,
                                          num_generations=2, per_device_train_batch_size=2, report_to="none"),
                          train_dataset=Dataset.from_list([{"prompt": prompt}]))
    trl_ids, _, _ = trainer._tokenize_prompts([prompt])
    assert list(trl_ids[0]) == policy.prompt_ids(prompt)


def test_datasets_stage_on_real_rollouts(trained, tmp_path, task_root):
    paths, _ = trained
    params = tmp_path / "params.yaml"
    text = (REPO / "params.yaml").read_text()
    params.write_text(text.replace("  dirs: [data/tasks]", f"  dirs: [{task_root}]"))
    out = tmp_path / "datasets"
    run = subprocess.run([sys.executable, "stages/build_datasets.py", "--params", str(params),
                          "--rollouts", str(paths.rollouts_dir / "rollouts.jsonl"), "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    for name in ("sft", "dpo", "dpo_filtered", "api_sft", "prm_sequence", "prm_step"):
        assert (out / f"{name}.jsonl").is_file()
    sft = list(iter_jsonl(out / "sft.jsonl"))
    assert sft and all(r["verifier_reward"] >= 0.9 for r in sft)  # passing rollouts became SFT rows

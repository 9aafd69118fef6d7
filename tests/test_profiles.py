"""The H100 profile (issue 10 item 6): the real configuration of every stage, validated, and seen by DVC.

- params.yaml + profiles/h100.yaml validates for every registered section, and holds the values of docs/design.md#the-gpu-configuration;
- on a scratch copy of the repository with the profile applied (`python scripts/apply_profile.py h100`, what
  `make profile-h100` runs), DVC parses dvc.yaml and the params (`dvc status`), lists the expected stages,
  and `dvc params diff` reports every key the profile changes (so `dvc repro` reruns their stages).
  Nothing runs: `dvc repro --dry` would stop at the first stage whose input another stage must make.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from termagent.params import SECTIONS, load_params, section, section_class

REPO = Path(__file__).resolve().parents[1]
H100 = load_params(REPO / "params.yaml", REPO / "profiles/h100.yaml")
EXPECTED_STAGES = {"image", "generate", "tasks", "base_model", "demos", "warmup", "sample_warmup", "grpo", "datasets",
                   "sft", "dpo", "sample_dpo", "curate", "mt_grpo", "report",
                   "mt_grpo_eval", *(f"eval@{m}" for m in ("base", "warmup", "grpo", "dpo"))}


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_every_section_of_the_h100_params_validates(name):
    assert name in H100, f"params.yaml has no section {name}"
    section(H100, name, section_class(name), file="params.yaml+h100")


def typed(name):
    return section(H100, name, section_class(name), file="params.yaml+h100")


def test_h100_holds_the_design_configuration():
    base, serve, ev = typed("base_model"), typed("serve"), typed("eval")
    assert (base.source, base.hf_id) == ("hf", "nvidia/Nemotron-Terminal-8B")
    assert base.revision == "REPLACE-WITH-COMMIT-SHA"  # a placeholder the base_model stage refuses (no guess)
    assert serve.backend == "vllm" and serve.vllm.gpu_memory_utilization == 0.85
    assert (serve.vllm.max_model_len, serve.vllm.max_model_len_lora) == (40960, 32768)
    assert (ev.backend, ev.attempts, ev.policy) == ("harbor", 5, "serve")
    assert (ev.harbor.agent, ev.harbor.temperature, ev.harbor.max_input_tokens, ev.harbor.max_output_tokens,
            ev.harbor.n_concurrent) == ("terminus-2", 0.7, 24000, 8192, 4)
    assert typed("sandbox").concurrency == 8 and typed("sandbox").pids_limit == 64
    # the eval is Harbor's terminus-2: every stage that renders a prompt sends its text (issue 28, item 5)
    assert typed("agent").protocol == "harbor-terminus-2" and typed("agent").harbor_version == "0.25.0"
    assert typed("generate").instances == 52 and typed("curate").target_size == 100
    assert typed("datasets").fail_threshold == 0.3 and typed("demos").concurrency == 6

    grpo = typed("grpo")
    assert (grpo.num_generations, grpo.per_device_train_batch_size, grpo.gradient_accumulation_steps) == (8, 4, 4)
    assert (grpo.max_completion_length, grpo.trl["learning_rate"], grpo.trl["beta"], grpo.trl["lr_scheduler_type"]) == \
        (2048, 5e-6, 0.005, "cosine")
    assert (grpo.lora.r, grpo.lora.alpha, grpo.use_vllm) == (64, 64, True)
    assert (grpo.round2.num_generations, grpo.round2.beta, grpo.round2.max_prompt_length) == (16, 0.01, 2048)
    assert typed("warmup").enabled is False  # GRPO starts from the base model

    sft = typed("sft")
    assert {k: sft.trl[k] for k in ("learning_rate", "lr_scheduler_type", "warmup_steps", "num_train_epochs")} == \
        {"learning_rate": 2e-5, "lr_scheduler_type": "cosine", "warmup_steps": 0.1, "num_train_epochs": 2.0}
    assert (sft.max_steps, sft.skip_seen_by) == (-1, None)  # the epochs decide; no warmup adapter to skip
    assert (sft.per_device_train_batch_size, sft.gradient_accumulation_steps, sft.max_length) == (1, 16, 8192)
    assert (sft.lora.r, sft.lora.alpha, sft.lora.modules_to_save) == (64, 64, [])
    assert any(d.startswith("open-thoughts/OpenThoughts-Agent-v1-SFT@") for d in sft.datasets)

    dpo = typed("dpo")
    assert (dpo.skip_if_empty, dpo.max_length, dpo.trl["learning_rate"], dpo.trl["beta"]) == (False, 8192, 1e-6, 0.1)

    mt = typed("mt_grpo")
    assert (mt.temperature, mt.trl["loss_type"], mt.max_completion_length, mt.scale_rewards, mt.num_generations) == \
        (1.0, "dr_grpo", 8192, "none", 8)
    assert mt.trl["learning_rate"] == 5e-6


def leaves(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(leaves(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A copy of the tracked files (and their working-tree edits), committed, then switched to h100."""
    root = tmp_path_factory.mktemp("h100") / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (REPO / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    git = ["git", "-c", "user.email=test@localhost", "-c", "user.name=test"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "embedded"]):
        subprocess.run([*git, *cmd], cwd=root, check=True, capture_output=True)
    out = run(root, sys.executable, "scripts/apply_profile.py", "h100")
    assert out.returncode == 0, out.stderr
    return root


def run(root: Path, *argv: str) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)  # the venv's dvc
    env = {**os.environ, "PYTHONPATH": str(root), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(list(argv), cwd=root, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_dvc_parses_the_h100_pipeline(scratch):
    stages = run(scratch, "dvc", "stage", "list", "--name-only")
    assert stages.returncode == 0, stages.stderr
    assert EXPECTED_STAGES <= set(stages.stdout.split())
    status = run(scratch, "dvc", "status", "--json")
    assert status.returncode == 0, status.stderr
    # Nothing of the DVC cache is in the scratch copy and the profile changes their params: all stale, except
    # `report`, whose inputs (the git-tracked eval metrics) and params the profile leaves as they are, so it is
    # up to date until the evals it reads rerun.
    assert EXPECTED_STAGES - {"report"} <= set(json.loads(status.stdout))


def test_dvc_sees_every_key_the_profile_changes(scratch):
    embedded = leaves(load_params(REPO / "params.yaml"))
    changed = {k for k, v in leaves(yaml.safe_load((REPO / "profiles/h100.yaml").read_text())).items()
               if embedded[k] != v}
    diff = run(scratch, "dvc", "params", "diff", "--json")
    assert diff.returncode == 0, diff.stderr
    seen = set(json.loads(diff.stdout)["params.yaml"])
    assert changed and changed <= seen, f"profile keys no dvc.yaml stage tracks: {sorted(changed - seen)}"


@pytest.mark.parametrize("script", ["demos", "dpo", "generate", "mt_grpo", "sft", "grpo", "eval"])
def test_every_stage_takes_params_and_profile_and_names_a_bad_profile(script):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    extra = {"sft": ["--stage", "sft", "--out", "x", "--metrics-dir", "x"],
             "eval": ["--model", "base", "--out", "x", "--metrics", "x"]}.get(script, [])
    out = subprocess.run([sys.executable, f"stages/{script}.py", *extra, "--params", "params.yaml",
                          "--profile", "nosuch"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert out.returncode != 0 and "profiles/nosuch.yaml: no such profile" in out.stderr, out.stderr

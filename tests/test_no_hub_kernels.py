"""No code from the Hub at run time: every model the project loads has transformers' Hub kernels off.

transformers 5 loads a model with `use_kernels=True` whenever the `kernels` package is installed, and then
kernelizes it (the model's `use_kernels` property, backed by `_use_kernels`, is True and `_kernels_mode` set);
on CUDA, `model.train()` downloads unpinned kernel code from the Hub. Each loader is checked with the
environment switch `USE_HUB_KERNELS` forced back to YES, so that what keeps kernels off is the loader's own
`use_kernels=False`, not the switch; the switch itself is checked where a library loads the model (TRL given a
model id, the server process).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def adapter(tiny_model_dir, tmp_path_factory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir, use_kernels=False),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    out = tmp_path_factory.mktemp("lora") / "adapter"
    model.save_pretrained(out)
    return out


@pytest.fixture
def hub_kernels_allowed(monkeypatch):
    """transformers' default as shipped: Hub kernels allowed by the environment."""
    monkeypatch.setenv("USE_HUB_KERNELS", "YES")


def kernels_on(model) -> bool:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return bool(base.use_kernels) or getattr(base, "_kernels_mode", None) is not None


def test_the_check_sees_kernels_when_transformers_default_is_left_alone(tiny_model_dir, hub_kernels_allowed):
    # Without this, every assertion below could pass on a transformers that never kernelizes.
    from transformers import AutoModelForCausalLM

    assert kernels_on(AutoModelForCausalLM.from_pretrained(tiny_model_dir))


@pytest.mark.parametrize("with_adapter", [False, True])
def test_training_load_model_has_no_hub_kernels(tiny_model_dir, adapter, with_adapter, hub_kernels_allowed):
    from termagent.train.common import load_model

    model = load_model(tiny_model_dir, adapter if with_adapter else None)
    assert not kernels_on(model)
    model.train()  # where transformers would (re-)kernelize for training
    assert not kernels_on(model)


@pytest.mark.parametrize("with_adapter", [False, True])
def test_in_process_policy_has_no_hub_kernels(tiny_model_dir, adapter, with_adapter, hub_kernels_allowed):
    from termagent.policy import make_policy

    policy = make_policy(f"hf:{tiny_model_dir}" + (f",adapter={adapter}" if with_adapter else "") + ",prefix_cache=1")
    try:
        assert not kernels_on(policy.model)  # the KV-cached decoder drives this same model
    finally:
        policy.close()


def test_serve_merge_and_server_process_have_no_hub_kernels(tiny_model_dir, adapter, hub_kernels_allowed):
    from termagent.serve import merged_model, server_env

    assert not kernels_on(merged_model(tiny_model_dir, adapter))
    # `transformers serve` / vLLM load the model in their own process: the environment switch decides there.
    for backend in ("transformers", "vllm"):
        assert server_env(backend)["USE_HUB_KERNELS"] == "NO"


def test_a_model_trl_loads_itself_in_a_training_process_has_no_hub_kernels(tiny_model_dir):
    # A fresh process, the switch unset as on a user's machine: importing the training code turns it off, so a
    # model TRL builds from a path (a model id given to a trainer, a non-PEFT DPO reference) gets no kernels.
    code = ("import termagent.train.common, sys\n"
            "from trl.trainer.utils import create_model_from_path\n"
            f"model = create_model_from_path({str(tiny_model_dir)!r})\n"
            "print(model.use_kernels, getattr(model, '_kernels_mode', None))\n")
    env = {k: v for k, v in os.environ.items() if k != "USE_HUB_KERNELS"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=600)
    assert out.stdout.strip().splitlines()[-1] == "False None"

"""GRPO fixtures: real task directories (Harbor layout, pytest verifier) on the sandbox base image, a
Sandbox, a task index and image file the stage script reads, and a warm-started tiny model.

The warm start is a real (if very short) supervised fine-tune of the session's tiny model on compact
replies, in the exact first-turn prompt GRPO uses: sampled at temperature 1 it then writes valid JSON
some of the time, which is what gives GRPO groups a nonzero reward std (the untrained tiny model never
parses, so every reward would be 0 and no weight could move)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from termagent.models.artifact import write_start
from termagent.tasks.load import load_task
from tests.sandbox.conftest import PYTEST_TEST_SH, write_harbor_task

TEST_SH = PYTEST_TEST_SH  # pytest grades, reward.txt 1 or 0

# Two tests: a reply that writes the wrong text gets exactly half the verifier credit.
TWO_TESTS = """\
from pathlib import Path

def test_file_exists():
    assert Path("/tmp/out.txt").exists()

def test_content():
    assert Path("/tmp/out.txt").read_text().strip() == "{word}"
"""

# A broken verifier (no reward file, no pytest summary): an infrastructure failure, never the model's 0.
NO_REWARD_SH = "#!/bin/bash\necho 'this verifier forgot to write its reward'\n"


def reply(keystrokes: str, task_complete: bool = True) -> str:
    return json.dumps({"analysis": "The terminal is empty.", "plan": "Write the file.",
                       "commands": [{"keystrokes": keystrokes, "duration": 0.2}], "task_complete": task_complete})


def compact_reply(keystrokes: str) -> str:
    return json.dumps({"analysis": "", "plan": "", "commands": [{"keystrokes": keystrokes}]}, separators=(",", ":"))


def write_task(root: Path, name: str, image: str, *, word: str = "hello", test_sh: str = TEST_SH) -> Path:
    return write_harbor_task(root, name, docker_image=image, test_sh=test_sh,
                             instruction=f"Write the word {word} into /tmp/out.txt.\n",
                             tests={"test_outputs.py": TWO_TESTS.format(word=word)},
                             solve_sh=f"#!/bin/bash\necho {word} > /tmp/out.txt\n")


@pytest.fixture(scope="session")
def grpo_sandbox(base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=4, warm_pool=8,
                                    output_limit_bytes=8192), client=docker_client)
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="session")
def task_root(tmp_path_factory, base_image) -> Path:
    root = tmp_path_factory.mktemp("grpo-tasks")
    write_task(root, "write-hello", base_image.tag, word="hello")
    write_task(root, "write-world", base_image.tag, word="world")
    return root


@pytest.fixture(scope="session")
def tasks(task_root):
    return [load_task(task_root / name) for name in ("write-hello", "write-world")]


@pytest.fixture(scope="session")
def stage_inputs(tmp_path_factory, tasks, base_image) -> dict[str, Path]:
    """data/tasks.json- and data/image.json-shaped files naming the fixture tasks (all in split train)."""
    from termagent.tasks.index import INDEX_VERSION, task_record

    d = tmp_path_factory.mktemp("grpo-inputs")
    records = [task_record(t, "train") | {"path": str(t.path)} for t in tasks]
    index = {"version": INDEX_VERSION, "eval_fraction": 0.25, "split_seed": 0, "stratify_by": None,
             "counts": {"train": len(records)}, "tasks": records}
    (d / "tasks.json").write_text(json.dumps(index))
    (d / "image.json").write_text(json.dumps({"image": base_image.tag}))
    return {"tasks": d / "tasks.json", "image": d / "image.json"}


@pytest.fixture(scope="session")
def warm_model_dir(tmp_path_factory, tiny_model_dir, tasks, grpo_sandbox) -> Path:
    """The tiny model, briefly fine-tuned (all weights, 120 steps, fp32) on a right and a wrong compact reply to each
    fixture task's real first-turn prompt (screens probed from real containers). Sampled at temperature 1
    it writes valid JSON most of the time, the right word some of the time: GRPO groups get a reward std."""
    import torch
    from transformers import AutoModelForCausalLM

    from termagent.train.common import fit_completions, load_tokenizer
    from termagent.train.single_turn import SingleTurnEnv

    env = SingleTurnEnv(grpo_sandbox, tasks)
    env.probe_screens(progress=False)
    tokenizer = load_tokenizer(tiny_model_dir)
    torch.manual_seed(0)
    # fp32 on every CPU (load_model gives bf16 weights where the CPU has bf16 instructions): the warm start is the same
    # kind of model everywhere. 120 steps: at 80 an AMD EPYC's model wrote no valid JSON in 16 samples (fp32 or bf16,
    # 2026-12-07; 0.375 on the Xeon before), at 160 always the wrong word; at 120 valid JSON 0.75, pass 0.19, every
    # group with a reward std
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32)
    examples = []
    for task in tasks:
        word = "hello" if "hello" in task.id else "world"
        prompt = tokenizer.apply_chat_template(env.prompt(task.id), add_generation_prompt=True, tokenize=True,
                                               return_dict=True)["input_ids"]
        for written in (word, "nope"):
            target = tokenizer(compact_reply(f"echo {written} > /tmp/out.txt\n") + tokenizer.eos_token,
                               add_special_tokens=False)["input_ids"]
            examples.append((prompt, target))
    fit_completions(model, examples, pad_token_id=tokenizer.pad_token_id, steps=120, lr=1e-2)
    out = tmp_path_factory.mktemp("warm") / "base"
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def warm_adapter(tmp_path_factory, warm_model_dir) -> Path:
    """A standard PEFT LoRA adapter on the warm model, as the warmup stage leaves one (here freshly
    initialised: B = 0, so it starts as the warm model itself)."""
    import torch
    from peft import get_peft_model

    from termagent.train.common import LoraParams, load_model, load_tokenizer

    torch.manual_seed(0)
    model = get_peft_model(load_model(warm_model_dir), LoraParams(r=8, alpha=16).to_peft())
    out = tmp_path_factory.mktemp("warm") / "warmup"
    model.save_pretrained(str(out))
    load_tokenizer(warm_model_dir).save_pretrained(str(out))
    write_start(out, base_dir=warm_model_dir, adapter=True)  # what the warmup stage records: GRPO starts here
    return out


@pytest.fixture(scope="session")
def warm_base_start(tmp_path_factory, warm_model_dir) -> Path:
    """A models/warmup as the warmup stage leaves it when off: start.json says "start from the base"."""
    out = tmp_path_factory.mktemp("start") / "warmup"
    write_start(out, base_dir=warm_model_dir, adapter=False)
    return out

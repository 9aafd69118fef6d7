"""TRL/PEFT glue every training stage shares: LoRA params, loading the base model (+ an adapter), CPU-safe
training arguments, dvclive curves, saving a standard PEFT adapter, and the stage's timing/metrics JSON.

Kept free of any one trainer: SFT, DPO, GRPO and MT-GRPO build their own `*Config` with
`training_kwargs(...)` and pass `dvclive_callback(...)` to their trainer.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from termagent import atomic
from termagent.precision import BF16_ENV, bf16_mode, cpu_bf16_flags, cpu_bf16_supported  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

# No code from the Hub at run time. transformers >= 5 loads a model with `use_kernels=True` whenever the `kernels`
# package is installed (transformers 5.25 depends on it); on CUDA `model.train()` then downloads unpinned kernel
# code from the Hub (offline: "Version 2 of 'kernels-community/rotary' is not available in the local cache").
# Every model this project loads passes `use_kernels=False` (load_model, the hf policy, serve's merge); this
# switch, which transformers reads on every `from_pretrained`, covers a model a library loads itself (TRL given
# a model id, or building a non-PEFT DPO reference). docs/kernels.md.
os.environ["USE_HUB_KERNELS"] = "NO"


# -- LoRA ---------------------------------------------------------------------------------------------------
@dataclass
class LoraParams:
    r: int = 64  # adapter rank (docs/design.md#the-gpu-configuration: r=64 on the 8B model)
    alpha: int = 64  # scaling = alpha / r (docs/design.md#the-gpu-configuration: alpha=64)
    dropout: float = 0.0  # 0: sampling and the loss see the same network (RESEARCH rec. 6)
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj",
                                                               "gate_proj", "up_proj", "down_proj"])  # all linear layers of a Qwen3 block
    # Whole modules trained and saved with the adapter (e.g. embed_tokens for the random-init tiny model,
    # whose embeddings know nothing); [] on a real model (vLLM loads plain LoRA adapters).
    modules_to_save: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.r <= 0:
            raise ValueError(f"lora.r must be > 0, got {self.r}")
        if not self.target_modules:
            raise ValueError("lora.target_modules must name at least one module")

    def to_peft(self):
        from peft import LoraConfig

        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=list(self.target_modules), bias="none", task_type="CAUSAL_LM",
                          modules_to_save=list(self.modules_to_save) or None)


# -- multi-GPU ----------------------------------------------------------------------------------------------
# Configured, not run here (this machine has no GPU): the training stage scripts call relaunch_distributed()
# first; with NUM_GPUS > 1 they re-exec under `accelerate launch` with configs/accelerate/*.yaml (DDP,
# DeepSpeed ZeRO-2 (default), ZeRO-3). The writes that are not TRL's own go through is_main_process():
# save_adapter, write_stage_metrics and plot_curves here, GRPO's timing/reward JSON and its run dirs,
# MT-GRPO's rollout log. Not yet rank-aware (see the scale-out notes in docs/h100-profile.md): GRPO's rollout log
# (each rank's reward function sees its own shard: a multi-GPU run logs rank 0's shard only), warmup's
# start.json (written by the stage script after training, identical on every rank: an atomic write, last
# one wins), and an adapter save under ZeRO-3 (parameters sharded: save_adapter on rank 0 alone would save
# the shards; use ddp or zero2 for LoRA, where every rank holds the whole adapter).
DEFAULT_ACCELERATE_CONFIG = "configs/accelerate/zero2.yaml"
LAUNCHER_ENV = ("LOCAL_RANK", "WORLD_SIZE")  # set by accelerate / torchrun: the process is already a rank
# Set on the relaunch itself: a launcher that starts the script without LOCAL_RANK / WORLD_SIZE (accelerate's
# MULTI_CPU single-machine path does) must not relaunch it again, forever.
RELAUNCHED_ENV = "TERMAGENT_RELAUNCHED"


def is_main_process() -> bool:
    """Rank 0 of a distributed launch (RANK, set by accelerate/torchrun), or a plain single process."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def relaunch_command(argv: list[str], env: dict[str, str]) -> list[str] | None:
    """The `accelerate launch` command line that re-runs `argv` (sys.argv: script + its options) on
    NUM_GPUS processes, or None when it should run as is: NUM_GPUS unset or <= 1, or already under a
    distributed launcher (LOCAL_RANK / WORLD_SIZE set) or relaunched once already. ACCELERATE_CONFIG picks the config file
    (default configs/accelerate/zero2.yaml). A NUM_GPUS that is not an integer is an error naming it."""
    raw = env.get("NUM_GPUS", "").strip()
    if not raw or any(env.get(name) for name in (*LAUNCHER_ENV, RELAUNCHED_ENV)):
        return None
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"env NUM_GPUS must be an integer number of GPUs, got {raw!r}") from None
    if n <= 1:
        return None
    config = env.get("ACCELERATE_CONFIG") or DEFAULT_ACCELERATE_CONFIG
    if not Path(config).is_file():
        raise FileNotFoundError(f"env ACCELERATE_CONFIG: {config} does not exist (configs/accelerate/ has "
                                f"ddp.yaml, zero2.yaml, zero3.yaml)")
    return ["accelerate", "launch", "--config_file", str(config), "--num_processes", str(n), *argv]


def relaunch_distributed(argv: list[str] | None = None) -> None:
    """Call first in a training stage script: with NUM_GPUS > 1, replace this process by
    `accelerate launch ... <script> <args>` (os.execvp; never returns then); otherwise return and train
    in this process. Configured but not run on this project's machine (CPU only)."""
    import sys

    cmd = relaunch_command(list(sys.argv if argv is None else argv), dict(os.environ))
    if cmd is None:
        return
    log.warning("NUM_GPUS=%s: relaunching as %s", cmd[cmd.index("--num_processes") + 1], " ".join(cmd))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(cmd[0], cmd, {**os.environ, RELAUNCHED_ENV: "1"})


# -- devices and training arguments -------------------------------------------------------------------------
def has_cuda() -> bool:
    return torch.cuda.is_available()


def bf16_supported() -> bool:
    """Train (and generate in process) in bf16: on a GPU that has it (bf16 weights) or on a CPU with bf16
    instructions (TRL/transformers `bf16=True` with `use_cpu=True`: autocast, the weights stay fp32). TRL
    defaults bf16=True even with use_cpu=True (RESEARCH §1.7), so this is always set explicitly."""
    if has_cuda():
        return bf16_mode() != "off" and torch.cuda.is_bf16_supported()
    return cpu_bf16_supported()


def vllm_kwargs(section: str, *, use_vllm: bool, mode: str, gpu_memory_utilization: float,
                importance_sampling_mode: str, max_model_length: int, enable_sleep_mode: bool = False) -> dict:
    """The GRPOConfig vLLM arguments of a stage (`section` names its params), `use_vllm=False` alone when vLLM
    is off; refuses use_vllm without CUDA (the CPU profile sets it false)."""
    if not use_vllm:
        return {"use_vllm": False}
    if not has_cuda():
        raise RuntimeError(f"params.yaml: {section}.use_vllm is true but there is no CUDA device "
                           f"(the embedded CPU profile sets {section}.use_vllm: false)")
    return {"use_vllm": True, "vllm_mode": mode, "vllm_gpu_memory_utilization": gpu_memory_utilization,
            "vllm_enable_sleep_mode": enable_sleep_mode, "vllm_importance_sampling_mode": importance_sampling_mode,
            "vllm_max_model_length": max_model_length}


def seed_everything(seed: int) -> None:
    """Seed Python, torch and numpy; every trainer calls it first, so it also sets the CPU allocator (allocator.py)."""
    from termagent import allocator

    allocator.configure()
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover
        pass


def training_kwargs(*, output_dir: str | Path, seed: int, logging_steps: int = 1,
                    gradient_checkpointing: bool = True, **extra: Any) -> dict[str, Any]:
    """Keyword arguments for any TRL `*Config` (a TrainingArguments subclass) that are safe on CPU and right
    on a GPU: bf16 only where supported, gradient checkpointing only on CUDA, use_cpu without CUDA, no
    `report_to` integrations (our dvclive callback is passed explicitly), no checkpoints unless asked. On a
    CPU with bf16 instructions `bf16=True` is CPU autocast (fp32 weights, bf16 matmuls; fp32 log-softmax in
    TRL's log-probabilities): 2.4x a fp32 LoRA step of SmolLM2 here (metrics/bench_bf16.json).
    `extra` overrides anything here."""
    cuda = has_cuda()
    kwargs: dict[str, Any] = {
        "output_dir": str(output_dir),
        "seed": seed,
        "data_seed": seed,
        "bf16": bf16_supported(),
        "fp16": False,
        "use_cpu": not cuda,
        "gradient_checkpointing": gradient_checkpointing and cuda,
        "logging_steps": logging_steps,
        "report_to": "none",
        "save_strategy": "no",
        "disable_tqdm": False,  # progress bars
        "dataloader_num_workers": 0,
    }
    kwargs.update(extra)
    return kwargs


# -- models -------------------------------------------------------------------------------------------------
def load_tokenizer(model_dir: str | Path):
    """The tokenizer of `model_dir` with the project's chat template (templates.install_template: models/base
    carries it already; a tokenizer saved elsewhere gets its family's), pad token set."""
    from transformers import AutoTokenizer

    from termagent.models.templates import install_template

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    try:
        install_template(tokenizer)
    except ValueError as error:
        raise ValueError(f"{model_dir}: {error}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(model_dir: str | Path, adapter_dir: str | Path | None = None, *, trainable: bool = True,
               adapter_name: str = "default"):
    """The base model from `model_dir` (a transformers directory), in bf16 on a GPU that has it, else fp32;
    with `adapter_dir`, wrapped as a PeftModel with that adapter loaded (trainable when asked).
    Returns the model (not yet moved: the trainer places it)."""
    from transformers import AutoModelForCausalLM

    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: no config.json (expected a transformers model directory)")
    # bf16 weights wherever bf16 computes (a GPU, or a CPU with bf16 instructions: 1.7-2.9x a fp32 LoRA step here,
    # metrics/bench_bf16.json); the LoRA adapters PEFT adds stay fp32, so their AdamW updates are not rounded away
    dtype = torch.bfloat16 if bf16_supported() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype, use_kernels=False)
    if adapter_dir is not None:
        from peft import PeftModel

        adapter_dir = Path(adapter_dir)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise FileNotFoundError(f"{adapter_dir}: no adapter_config.json (expected a PEFT adapter directory)")
        model = PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=trainable,
                                          adapter_name=adapter_name)
    return model


def fit_completions(model, examples: list[tuple[list[int], list[int]]], *, pad_token_id: int, steps: int,
                    lr: float) -> float:
    """A few full-batch AdamW steps of next-token loss on (prompt_ids, target_ids) pairs, the loss on the
    targets only: the quick warm start a GRPO test or benchmark needs so that replies sometimes parse.
    Returns the last loss."""
    width = max(len(p) + len(t) for p, t in examples)
    ids = torch.full((len(examples), width), pad_token_id)
    labels = torch.full((len(examples), width), -100)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, (p, t) in enumerate(examples):
        ids[i, : len(p) + len(t)] = torch.tensor(p + t)
        labels[i, len(p): len(p) + len(t)] = torch.tensor(t)
        mask[i, : len(p) + len(t)] = 1
    optim = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optim.step()
        optim.zero_grad()
    return float(loss)


def save_adapter(model, tokenizer, out_dir: str | Path, *, manifest: dict | None = None) -> Path:
    """A standard PEFT adapter (adapter_config.json + adapter_model.safetensors) and the tokenizer, written
    atomically to `out_dir`: `PeftModel.from_pretrained(base, out_dir)` and vLLM `--lora-modules` load it.
    Only the "default" adapter is saved (DPO's "ref" copy is not part of the result). Main process only
    (a multi-GPU run: the other ranks return the path unwritten)."""
    if not is_main_process():
        return Path(out_dir)
    with atomic.staged_dir(out_dir) as staging:
        if _is_peft(model):
            model.save_pretrained(str(staging), selected_adapters=["default"])
        else:
            model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        if manifest is not None:
            atomic.write_json(staging / "manifest.json", manifest)
    return Path(out_dir)


def _is_peft(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover
        return False
    return isinstance(model, PeftModel)


def adapter_state(model, adapter_name: str = "default") -> dict[str, torch.Tensor]:
    """A CPU copy of the LoRA weights of one adapter (for "did training change them" checks)."""
    return {name: p.detach().float().cpu().clone() for name, p in model.named_parameters()
            if ("lora_" in name or "modules_to_save" in name) and f".{adapter_name}." in name}


def require_update(stage: str, before: dict[str, torch.Tensor], after: dict[str, torch.Tensor], steps: int) -> int:
    """How many trained tensors (`adapter_state`-like snapshots before and after training) changed. Fails a
    run whose optimizer steps changed none: saving it would pass the start model off as trained (the usual
    cause: a schedule at 0 throughout, e.g. a warmup as long as a one-step run)."""
    changed = sum(not after[k].equal(before[k]) for k in before)
    if steps > 0 and before and changed == 0:
        raise RuntimeError(f"{stage}: {steps} optimizer step(s) changed none of the {len(before)} trained tensors; "
                           "the learning rate was 0 at every step (a warmup as long as the run?) or every "
                           "gradient was 0. Nothing saved: fix learning_rate / warmup_ratio / the step count")
    return changed


# -- dvclive ------------------------------------------------------------------------------------------------
# Off only in scripts/gpu_check.py: the lent GPU machine carries the training stack, not DVC (dvclive needs dvc);
# the check reads its numbers from the trainers' log history instead. Every stage logs through dvclive.
USE_DVCLIVE = True


def dvclive_callback(stage_metrics_dir: str | Path, step_offset: int = 0):
    """A transformers DVCLiveCallback writing `<dir>/dvclive/` (plots/metrics/*.tsv, metrics.json) without
    touching dvc.yaml or creating DVC experiments, its step = the trainer's global_step (RESEARCH §5).
    `step_offset` > 0: a second run of the same stage (a curriculum phase) appends to the series of the
    first, its steps shifted by the first's."""
    if not USE_DVCLIVE:
        from transformers import TrainerCallback

        return TrainerCallback()
    from dvclive import Live
    from transformers.integrations import DVCLiveCallback

    class _StepCallback(DVCLiveCallback):
        def on_log(self, args, state, control, model=None, logs=None, **kwargs):
            if self.live is not None:
                self.live.step = step_offset + state.global_step
            return super().on_log(args, state, control, model=model, logs=logs, **kwargs)

    live = Live(dir=str(Path(stage_metrics_dir) / "dvclive"), dvcyaml=False, save_dvc_exp=False,
                report=None, resume=step_offset > 0)
    return _StepCallback(live=live, log_model=None)


def read_dvclive_series(stage_metrics_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """{metric: [(step, value), ...]} from the dvclive TSVs under `<dir>/dvclive/plots/metrics/`."""
    root = Path(stage_metrics_dir) / "dvclive" / "plots" / "metrics"
    series: dict[str, list[tuple[int, float]]] = {}
    for tsv in sorted(root.rglob("*.tsv")) if root.is_dir() else []:
        header, *rows = tsv.read_text().splitlines()
        columns = header.split("\t")
        if "step" not in columns or len(columns) < 2:
            continue
        step_at, value_at = columns.index("step"), len(columns) - 1
        name = str(tsv.relative_to(root).with_suffix(""))
        series[name] = [(int(r.split("\t")[step_at]), float(r.split("\t")[value_at]))
                        for r in rows if r.count("\t") >= len(columns) - 1]
    return series


def plot_curves(stage_metrics_dir: str | Path, png_path: str | Path, title: str, note: str = "") -> Path | None:
    """One PNG with a panel per logged series (loss, learning rate, grad norm, ...); when nothing was
    logged (a skipped stage), a PNG that says so and why (`note`), so the stage's outputs always exist.
    Other ranks than the main process write nothing (None)."""
    if not is_main_process():
        return None
    series = read_dvclive_series(stage_metrics_dir)
    skip = ("epoch", "total_flos", "num_tokens", "train/")
    series = {k: v for k, v in series.items() if v and not k.startswith(skip)}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not series:
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, f"{title}\nno training step logged\n{note}", ha="center", va="center", wrap=True)
        return _save_png(fig, png_path, plt)
    names = sorted(series)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        steps, values = zip(*series[name])
        ax.plot(steps, values, marker="." if len(steps) < 30 else None)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    return _save_png(fig, png_path, plt)


def _save_png(fig, png_path: str | Path, plt) -> Path:
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic.target(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    return png_path


# -- stage metrics ------------------------------------------------------------------------------------------
class StageTimer:
    """Wall time per phase of a stage: `with timer.phase("train"): ...`; `timer.as_dict()`."""

    def __init__(self):
        self.start = time.monotonic()
        self.phases: dict[str, float] = {}

    def phase(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self):
                self.t0 = time.monotonic()

            def __exit__(self, *exc):
                timer.phases[name] = timer.phases.get(name, 0.0) + time.monotonic() - self.t0
                return False

        return _Phase()

    def as_dict(self) -> dict[str, Any]:
        return {"wall_s": round(time.monotonic() - self.start, 3),
                "phases_s": {k: round(v, 3) for k, v in self.phases.items()}}


def environment() -> dict[str, Any]:
    import transformers

    from termagent import allocator

    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "device": "cuda" if has_cuda() else "cpu",
           "torch_threads": torch.get_num_threads(), "bf16": bf16_supported(), "cpu_bf16_flags": cpu_bf16_flags(),
           "malloc": allocator.configure()["mode"]}
    for name in ("trl", "peft"):
        try:
            env[name] = __import__(name).__version__
        except ImportError:  # pragma: no cover
            pass
    if has_cuda():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def write_stage_metrics(path: str | Path, stage: str, timer: StageTimer | None = None, **metrics: Any) -> Path:
    """metrics/<stage>/train.json (or any path): stage name, timings, environment, and the stage's numbers.
    Main process only (the other ranks of a multi-GPU run write nothing)."""
    if not is_main_process():
        return Path(path)
    return atomic.write_json(path, stage_metrics_doc(stage, timer, **metrics))


def stage_metrics_doc(stage: str, timer: StageTimer | None = None, **metrics: Any) -> dict[str, Any]:
    """What write_stage_metrics writes, as a JSON-ready dict (every rank can compute it)."""
    doc: dict[str, Any] = {"stage": stage}
    if timer is not None:
        doc.update(timer.as_dict())
    doc.update(metrics)
    doc["environment"] = environment()
    doc["peak_rss_gib"] = peak_rss_gib()
    return json.loads(json.dumps(doc, default=_jsonable))


def peak_rss_gib() -> float:
    """This process's peak resident memory so far, in GiB (Linux reports ru_maxrss in KiB): each training stage's
    train.json records it, so a stage that grows under a shared host shows it."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)


def _jsonable(obj: Any):
    if hasattr(obj, "__dataclass_fields__"):
        return asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    return str(obj)

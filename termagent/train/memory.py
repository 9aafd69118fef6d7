"""GPU memory plan of a training stage, computed from the model's config.json and the stage's params before
anything is loaded: a configuration that cannot fit is refused with the params to change, not found out by an
out-of-memory error an hour into a run.

    python -m termagent.train.memory --model models/base --gpu-gib 80     # every stage of params.yaml
    python -m termagent.train.memory --profile h100 --model models/base     # with a profile, this machine's GPU

The estimate counts what autograd keeps, tensor by tensor, for a Qwen3/Llama decoder with a frozen bf16 base and
PEFT LoRA adapters, per token and layer (h hidden, q = heads x head_dim, kv = kv_heads x head_dim, I intermediate):

    input and post-attention RMSNorm   2 x 4h         (the fp32 upcast of the input)
    q_norm / k_norm                    4 (q + kv)     (fp32 upcast, per head)
    SDPA q, k, v and output            4q + 4kv       (unpadded rows: grouped-query attention, k/v not repeated)
    SwiGLU                             3 x 2I         (gate, silu(gate), up)
    each adapted module                b x (d_in + r) (its own copy of the input in the adapter's dtype, and A's
                                                       output: b = 2 under the trainers' bf16 autocast, 4 for a
                                                       plain bf16 model, whose fp32 adapters upcast the input)

The loss adds, per logit, 2.5 bytes in the trainers (bf16 logits; TRL's and transformers' losses never hold a
full fp32 copy: 2.1-2.3 B measured) and 10 bytes for a plain `model(labels=...)` (bf16 logits, their fp32 upcast,
the fp32 log-softmax). With gradient checkpointing only each layer's input (2h) stays, plus one layer recomputed
in the backward; the logits' peak and that layer's do not overlap. Static memory: the bf16 weights, and per
adapter parameter 16 bytes (fp32 weight, grad, two AdamW moments; 8 before the first optimizer step).

Checked three ways (tests/train/test_memory.py): the per-layer count against the tensors autograd saves in a
small Qwen3 on CPU, with and without autocast (within 5 %); a plain forward+backward of one 9,000-token sequence
through the Qwen3-8B shape on the lent H200 (33.9 GiB with checkpointing, 121.2 without: the plan says 31.8 and
118.4); and `make gpu-check`'s stages on the H200 (metrics/bench_gpu.json: SFT, SFT without checkpointing, DPO and
MT-GRPO at the H100 profile's shapes, each within 12 %).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

GIB = 1024 ** 3
# Per-module input width, by the names PEFT targets on Qwen3/Llama blocks.
_ATTN_IN = ("q_proj", "k_proj", "v_proj")
_MLP_IN = ("gate_proj", "up_proj")
LOGIT_BYTES_TRAINER = 2.5  # bf16 logits; the trainers' losses work on them in chunks (2.1-2.3 B measured)
LOGIT_BYTES_PLAIN = 10  # bf16 logits + fp32 upcast + fp32 log-softmax kept for the backward
CUDA_CONTEXT_BYTES = int(0.75 * GIB)  # CUDA context + allocator slack, outside torch's own counters


class MemoryPlanError(RuntimeError):
    pass


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool

    @classmethod
    def from_config(cls, config) -> ModelShape:
        get = config.get if isinstance(config, dict) else (lambda k, d=None: getattr(config, k, d))
        missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                               "vocab_size") if get(k) is None]
        if missing:
            raise MemoryPlanError(f"model config lacks {missing}: not a decoder the memory plan knows")
        heads = int(get("num_attention_heads"))
        hidden = int(get("hidden_size"))
        return cls(hidden=hidden, layers=int(get("num_hidden_layers")), heads=heads,
                   kv_heads=int(get("num_key_value_heads") or heads),
                   head_dim=int(get("head_dim") or hidden // heads), intermediate=int(get("intermediate_size")),
                   vocab=int(get("vocab_size")), tied=bool(get("tie_word_embeddings", False)))

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> ModelShape:
        path = Path(model_dir) / "config.json"
        if not path.is_file():
            raise MemoryPlanError(f"{path}: no config.json (the memory plan reads the model's shape from it)")
        config = json.loads(path.read_text())
        return cls.from_config(config.get("text_config", config))

    @property
    def q(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:
        return self.kv_heads * self.head_dim

    def module_dims(self) -> dict[str, tuple[int, int]]:
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, self.q), "k_proj": (h, self.kv), "v_proj": (h, self.kv), "o_proj": (self.q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def n_params(self) -> int:
        per_layer = sum(a * b for a, b in self.module_dims().values()) + 2 * self.hidden + 2 * self.head_dim
        embed = self.vocab * self.hidden
        return self.layers * per_layer + embed * (1 if self.tied else 2) + self.hidden


def lora_params(shape: ModelShape, r: int, targets: list[str]) -> int:
    dims = shape.module_dims()
    unknown = [t for t in targets if t not in dims]
    if unknown:
        raise MemoryPlanError(f"lora.target_modules {unknown}: the memory plan knows {sorted(dims)}")
    return shape.layers * sum(r * (dims[t][0] + dims[t][1]) for t in targets)


def activation_bytes(shape: ModelShape, r: int, targets: list[str], *, autocast: bool = True) -> int:
    """Bytes autograd keeps per token and layer (module docstring)."""
    h, q, kv, i = shape.hidden, shape.q, shape.kv, shape.intermediate
    kept = 2 * 4 * h + 4 * (q + kv) + 4 * q + 4 * kv + 3 * 2 * i
    dims = shape.module_dims()
    b = 2 if autocast else 4
    kept += sum(b * (dims[t][0] + r) for t in targets)
    return kept


@dataclass
class StagePlan:
    stage: str
    seq_len: int  # tokens of one sequence
    micro_batch: int  # sequences in one forward/backward
    checkpointing: bool
    weights_gib: float
    adapter_gib: float
    activations_gib: float
    logits_gib: float
    reserved_gib: float  # vLLM colocate's share, CUDA context
    total_gib: float
    budget_gib: float | None = None
    note: str = ""

    @property
    def fits(self) -> bool:
        return self.budget_gib is None or self.total_gib <= self.budget_gib

    def as_dict(self) -> dict:
        return {**asdict(self), "fits": self.fits}


def plan(stage: str, shape: ModelShape, *, seq_len: int, micro_batch: int, checkpointing: bool, lora_r: int,
         lora_targets: list[str], optimizer: bool = True, reference_forward: bool = False,
         reserved_fraction: float = 0.0, gpu_bytes: int | None = None, weight_bytes: int = 2,
         autocast: bool = True, note: str = "") -> StagePlan:
    """Peak GPU memory of one training micro-step of `stage` (`autocast`: as the trainers run, bf16=True; off: a
    plain bf16 model's forward and backward)."""
    tokens = seq_len * micro_batch
    weights = shape.n_params() * weight_bytes
    n_lora = lora_params(shape, lora_r, lora_targets)
    adapter = n_lora * (16 if optimizer else 8)
    per_layer = activation_bytes(shape, lora_r, lora_targets, autocast=autocast)
    logits = int(tokens * shape.vocab * (LOGIT_BYTES_TRAINER if autocast else LOGIT_BYTES_PLAIN))
    if checkpointing:
        layer_inputs = shape.layers * tokens * 2 * shape.hidden
        activations = layer_inputs + max(logits, tokens * per_layer)
        peak_extra = activations
    else:
        activations = shape.layers * tokens * per_layer
        peak_extra = activations + logits
    if reference_forward:  # DPO's reference pass (adapter disabled, no grad): its logits alone
        peak_extra = max(peak_extra, logits)
    reserved = CUDA_CONTEXT_BYTES + (int(reserved_fraction * gpu_bytes) if gpu_bytes else 0)
    total = weights + adapter + peak_extra + reserved
    return StagePlan(stage=stage, seq_len=seq_len, micro_batch=micro_batch, checkpointing=checkpointing,
                     weights_gib=round(weights / GIB, 2), adapter_gib=round(adapter / GIB, 2),
                     activations_gib=round((peak_extra - (0 if checkpointing else logits)) / GIB, 2),
                     logits_gib=round(logits / GIB, 2), reserved_gib=round(reserved / GIB, 2),
                     total_gib=round(total / GIB, 2),
                     budget_gib=round(gpu_bytes / GIB, 2) if gpu_bytes else None, note=note)


def require_fits(p: StagePlan, *, knobs: str) -> StagePlan:
    """Raise before anything is loaded when the plan exceeds the GPU; `knobs` names the params to change."""
    if not p.fits:
        raise MemoryPlanError(
            f"{p.stage}: the memory plan needs {p.total_gib:.1f} GiB on a {p.budget_gib:.1f} GiB GPU "
            f"(weights {p.weights_gib}, adapter+optimizer {p.adapter_gib}, activations {p.activations_gib}, "
            f"logits {p.logits_gib}, reserved {p.reserved_gib}; {p.micro_batch} x {p.seq_len} tokens per "
            f"micro-batch, gradient checkpointing {'on' if p.checkpointing else 'off'}): lower {knobs}")
    return p


def check_before_loading(stage: str, model_dir: str | Path, *, knobs: str, **shape_kwargs) -> StagePlan | None:
    """On a GPU, plan `stage` from `model_dir`'s config.json and refuse it (MemoryPlanError) when it cannot fit;
    None without CUDA (nothing to plan)."""
    import logging

    gpu = gpu_total_bytes()
    if gpu is None:
        return None
    p = require_fits(plan(stage, ModelShape.from_dir(model_dir), gpu_bytes=gpu, **shape_kwargs), knobs=knobs)
    logging.getLogger(__name__).info("%s memory plan: %s", stage, p.as_dict())
    return p


def gpu_total_bytes() -> int | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory


# -- the stages' shapes, from their params --------------------------------------------------------------
def stage_plans(params: dict, shape: ModelShape, gpu_bytes: int | None) -> list[StagePlan]:
    """The plan of every GPU training stage under `params` (a params.yaml mapping, dataclass defaults filled in)."""
    from termagent.params import SECTIONS, section, section_class

    params = {name: asdict(section(params, name, section_class(name))) if name in params and name in SECTIONS
              else value for name, value in params.items()}
    out = []
    sft = params.get("sft") or {}
    if sft:
        lora = sft.get("lora") or {}
        out.append(plan("sft", shape, seq_len=int(sft["max_length"]),
                        micro_batch=int(sft["per_device_train_batch_size"]), checkpointing=True,
                        lora_r=int(lora.get("r", 64)), lora_targets=list(lora.get("target_modules", [])),
                        gpu_bytes=gpu_bytes))
    dpo = params.get("dpo") or {}
    if dpo and sft:
        lora = (params.get("sft") or {}).get("lora") or {}
        out.append(plan("dpo", shape, seq_len=int(dpo["max_length"]),
                        micro_batch=2 * int(dpo["per_device_train_batch_size"]), checkpointing=True,
                        lora_r=int(lora.get("r", 64)), lora_targets=list(lora.get("target_modules", [])),
                        reference_forward=True, gpu_bytes=gpu_bytes, note="chosen + rejected in one forward"))
    grpo = params.get("grpo") or {}
    if grpo:
        lora = grpo.get("lora") or {}
        frac = float(grpo.get("vllm_gpu_memory_utilization", 0.0)) if grpo.get("use_vllm") else 0.0
        out.append(plan("grpo", shape, seq_len=int(grpo["max_prompt_length"]) + int(grpo["max_completion_length"]),
                        micro_batch=int(grpo["per_device_train_batch_size"]), checkpointing=True,
                        lora_r=int(lora.get("r", 64)), lora_targets=list(lora.get("target_modules", [])),
                        reserved_fraction=frac, gpu_bytes=gpu_bytes))
    mt = params.get("mt_grpo") or {}
    if mt:
        out.append(mt_grpo_plan(mt, shape, gpu_bytes))
    return out


def mt_grpo_plan(mt: dict, shape: ModelShape, gpu_bytes: int | None) -> StagePlan:
    lora = mt.get("lora") or {}
    frac = float(mt.get("vllm_gpu_memory_utilization", 0.0)) if mt.get("use_vllm") else 0.0
    return plan("mt_grpo", shape, seq_len=int(mt["max_prompt_length"]) + int(mt["max_completion_length"]),
                micro_batch=int(mt["micro_batch_size"]) or int(mt["tasks_per_step"]) * int(mt["num_generations"]),
                checkpointing=bool(mt.get("gradient_checkpointing", True)),
                lora_r=int(lora.get("r", 64)), lora_targets=list(lora.get("target_modules", [])),
                reserved_fraction=frac, gpu_bytes=gpu_bytes,
                note="the first prompt is planned at mt_grpo.max_prompt_length tokens")


def main(argv: list[str] | None = None) -> int:
    import argparse

    import yaml

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--profile", default=None, help="a profile applied over --params (e.g. h100)")
    parser.add_argument("--model", default="models/base", help="a model directory (its config.json) or config.json")
    parser.add_argument("--gpu-gib", type=float, default=None, help="GPU memory (default: this machine's GPU)")
    args = parser.parse_args(argv)
    model = Path(args.model)
    shape = ModelShape.from_dir(model if model.is_dir() else model.parent)
    gpu = int(args.gpu_gib * GIB) if args.gpu_gib else gpu_total_bytes()
    from termagent.params import load_params

    params = load_params(args.params, args.profile) if args.profile else yaml.safe_load(Path(args.params).read_text())
    plans = stage_plans(params, shape, gpu)
    print(f"{'stage':9} {'batch x len':>14} {'ckpt':>5} {'weights':>8} {'adapter':>8} {'activ.':>8} {'logits':>7} "
          f"{'reserved':>8} {'total':>7} {'GPU':>6}")
    for p in plans:
        print(f"{p.stage:9} {p.micro_batch:>5} x {p.seq_len:<6} {'on' if p.checkpointing else 'off':>5} "
              f"{p.weights_gib:8.1f} {p.adapter_gib:8.1f} {p.activations_gib:8.1f} {p.logits_gib:7.1f} "
              f"{p.reserved_gib:8.1f} {p.total_gib:7.1f} {p.budget_gib or 0:6.0f}{'' if p.fits else '  DOES NOT FIT'}")
    return 0 if all(p.fits for p in plans) else 1


if __name__ == "__main__":
    raise SystemExit(main())

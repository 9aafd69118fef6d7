"""RL rollouts on the OpenVINO engine with the trainer's live LoRA weights (`engine.rl: true`).

TRL's GRPOTrainer already knows how to generate on an engine that is not the model it trains: vLLM. It keeps the
engine in `trainer.vllm_generation`, calls `sync_weights()` once per optimizer step before generating, asks it for
token ids (`generate(prompts=ids, images, num_generations)`, token-in/token-out), and — with
`vllm_importance_sampling_correction` — recomputes the sampled tokens' logprobs with the fp32 trainer and reweights
the loss by the truncated ratio (mode `token_truncate`, cap `is_clip_max`). `attach_engine` puts the OpenVINO engine in
that seat (`EngineGeneration`), so GRPO's `_generate` (single turn: TRL's own `_generate_single_turn`) and MT-GRPO's
`rollout_func` (termagent.policy.trl_vllm.TRLvLLMPolicy over it, per turn, the trained tokens the sampled ones) both
generate on the engine, and TRL's importance-sampling code applies unchanged.

- sync_weights: the adapter's state dict (get_peft_model_state_dict, in memory) handed to the engine as safetensors
  bytes: runtime LoRA or a fused rebuild (`engine.adapter_mode`).
- The engine samples from the temperature-scaled logits of an IR whose output is multiplied by 1 / temperature
  (termagent.policy.openvino.temperature_ir), so its logprobs are TRL's quantity, log softmax(logits / T).
- The gap is measured by TRL itself with the correction on: `sampling/sampling_logp_difference/mean|max` (|engine -
  trainer| over sampled tokens) and `sampling/importance_sampling_ratio/min|mean|max` per step, in the stage's dvclive.
"""

from __future__ import annotations

import json
from pathlib import Path

from termagent.policy.openvino import EngineConfig


class EngineGeneration:
    """The OpenVINO engine in TRL's `vllm_generation` seat (the parts GRPOTrainer and TRLvLLMPolicy use)."""

    def __init__(self, trainer, policy, *, scale: float):
        self.trainer, self.policy, self.scale = trainer, policy, scale
        self.temperature = float(trainer.temperature)
        self.top_p = float(trainer.top_p if trainer.top_p is not None else 1.0)
        self.generation_kwargs: dict = {}  # TRLvLLMPolicy sets max_tokens per call here
        self.synced_steps = 0

    def sync_weights(self) -> None:
        from peft import get_peft_model_state_dict

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self.policy.set_adapter(get_peft_model_state_dict(model), self.scale)
        self.synced_steps += 1

    def generate(self, prompts, images=None, num_generations: int = 1, profiler=None):
        """One completion per entry of `prompts` (token ids; TRL has already repeated each num_generations times):
        (prompt_ids, completion_ids, logprobs [row][token][1], None), as VLLMGeneration.generate returns."""
        if images is not None and any(images):
            raise ValueError("engine rollouts: images are not supported")
        max_tokens = int(self.generation_kwargs.get("max_tokens", self.trainer.max_completion_length))
        generations = self.policy.generate_ids([list(p) for p in prompts], max_tokens=max_tokens,
                                               temperature=self.temperature, top_p=self.top_p)
        logprobs = [[[lp] for lp in (g.logprobs or [None] * len(g.completion_ids))] for g in generations]
        return [g.prompt_ids for g in generations], [g.completion_ids for g in generations], logprobs, None


def engine_for(trainer, engine: EngineConfig | None, base_dir: str | Path):
    """`attach_engine` when `engine.rl` is on (the engine policy, to close after training), else None."""
    return attach_engine(trainer, engine, base_dir) if engine is not None and engine.rl else None


def attach_engine(trainer, engine: EngineConfig, base_dir: str | Path):
    """Route the trainer's generation through the OpenVINO engine on base_dir's IR (models/base_openvino) with its
    current adapter; TRL's importance-sampling correction follows `engine.is_*`. Returns the engine policy (close it
    after training)."""
    from termagent.policy import make_policy
    from termagent.policy.openvino import lora_scale
    from termagent.policy.spec import engine_spec

    if getattr(trainer, "vllm_generation", None) is not None:
        raise ValueError("engine.rl: the trainer already generates on vLLM (use_vllm true); the OpenVINO engine is "
                         "the CPU's: set engine.rl false where use_vllm is on (the H100 profile does)")
    model = trainer.accelerator.unwrap_model(trainer.model)
    peft_config = getattr(model, "peft_config", {}).get("default")
    if peft_config is None:
        raise ValueError("engine.rl: the trainer's model has no LoRA adapter to hand the engine")
    policy = make_policy(engine_spec(engine, Path(base_dir), max_batch=max(8, trainer.num_generations),
                                     logit_temperature=float(trainer.temperature)))
    generation = EngineGeneration(trainer, policy, scale=lora_scale(json.loads(json.dumps(peft_config.to_dict(),
                                                                                          default=str))))
    # TRL's vLLM seat: sync_weights before each step's generation, token ids in and out, and the importance ratio
    trainer.vllm_generation = generation
    trainer.use_vllm = True
    trainer.vllm_mode = "openvino"  # not "colocate": TRL reads no vLLM engine config
    trainer._last_loaded_step = -1
    trainer.vllm_importance_sampling_correction = engine.is_correction
    trainer.vllm_importance_sampling_mode = engine.is_mode
    trainer.vllm_importance_sampling_clip_max = engine.is_clip_max
    return policy

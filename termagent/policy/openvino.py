"""Generation on OpenVINO GenAI's continuous-batching engine: the CPU backend of evals, sampling and RL rollouts.

Spec (termagent.policy.spec.OpenVINOSpec): `openvino:IR_DIR[,tokenizer=DIR][,adapter=DIR][,precision=auto]...`.
IR_DIR is the `export_openvino` stage's output (models/base_openvino, optimum-cli's IR of models/base).

- Token-in/token-out: prompts are the ids the project's own tokenizer and chat template render (`prompt_ids`, equal
  to `apply_chat_template`); the IR's tokenizer is never used to encode. The engine returns the sampled ids exactly
  as sampled, and their logprobs where they are the policy's (GenerationConfig.logprobs gives raw ones: log softmax of
  the logits before temperature, so at temperature 1 and greedy only).
- One engine thread owns `openvino_genai.ContinuousBatchingPipeline`: every caller's prompt becomes a request
  (`add_request`), and the thread steps the pipeline while any is unfinished. A call that arrives while others decode
  joins the running batch at the next step; a row that ends leaves it. So concurrent trials (eval at concurrency 8,
  a group of MT-GRPO rollouts) decode together with no gathering window, each with its own max_tokens and seed.
- Prefix caching (SchedulerConfig.enable_prefix_caching): the KV blocks of earlier turns stay in the block cache,
  so an episode's next call prefills only its new tokens; this replaces termagent.policy.kv's per-episode caches.
- Seeds: a request's `rng_seed` is the call's seed + its row (an unseeded call draws one from Python's `random`,
  which the stages seed), so a sample does not depend on which other requests share its batch.
- Adapters: a saved PEFT adapter (`adapter=DIR`, the eval of a trained stage) is fused into the weights at build
  (base speed). RL's live adapter (`set_adapter(state_dict)`, the trainer's LoRA after each optimizer step) goes in
  as runtime LoRA from in-memory safetensors bytes (`adapter_mode=runtime`, no rebuild) or a fused rebuild
  (`adapter_mode=fuse`); scripts/bench_engine.py measures both.
- logit_temperature=T (RL): the engine runs an IR whose logits are divided by T (`temperature_ir`), so a call at
  temperature T samples the same distribution and its logprobs are log softmax(logits / T), TRL's quantity.
- Precision: `auto` leaves OpenVINO's default (bf16 compute on a CPU with bf16/AMX instructions, detected), `f32`
  computes in fp32 (greedy rows equal to torch fp32; slower).
"""

from __future__ import annotations

import collections
import json
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

from termagent.policy.base import Generation, PolicyError, TokenPolicy

PRECISIONS = {"auto": None, "f32": "f32", "bf16": "bf16"}
ADAPTER_MODES = ("runtime", "fuse")
IR_SUFFIX = "_openvino"  # models/base -> models/base_openvino (the export_openvino stage)


@dataclass(frozen=True)
class EngineConfig:
    """The `engine:` section: how the OpenVINO engine runs wherever a stage selects it (eval.policy openvino: the
    evals and sample stages; rl: GRPO's and MT-GRPO's rollouts)."""

    precision: str = "auto"  # auto: OpenVINO's default (bf16 compute where the CPU has bf16/AMX) | f32 | bf16
    kv_cache_gb: float = 2.0  # the engine's KV block cache
    prefix_caching: bool = True  # earlier turns' KV blocks reused: a turn prefills only its new tokens
    rl: bool = True  # GRPO / MT-GRPO generate on the engine with the trainer's live LoRA (else the trainer's model)
    adapter_mode: str = "fuse"  # RL's live adapter: runtime (per request, no rebuild) | fuse (rebuild per step)
    # RL on the engine: TRL's truncated importance sampling (vllm_importance_sampling_correction) against the gap
    # between the engine's bf16 sampling logprobs and the trainer's fp32 ones; mode and cap as TRL names them
    is_correction: bool = True
    is_mode: str = "token_truncate"
    is_clip_max: float = 3.0

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"engine.precision must be one of {sorted(PRECISIONS)}, got {self.precision!r}")
        if self.adapter_mode not in ADAPTER_MODES:
            raise ValueError(f"engine.adapter_mode must be one of {ADAPTER_MODES}, got {self.adapter_mode!r}")
        if self.kv_cache_gb <= 0:
            raise ValueError(f"engine.kv_cache_gb must be > 0, got {self.kv_cache_gb}")


def ir_dir_for(base: str | Path) -> Path:
    """Where the export_openvino stage writes the IR of a transformers directory: models/base -> models/base_openvino."""
    base = Path(base)
    return base.with_name(base.name + IR_SUFFIX)


def adapter_from_state_dict(state_dict: dict):
    """An `openvino_genai.Adapter` from an in-memory PEFT state dict (names as `save_pretrained` writes them): the
    dict serialised to safetensors bytes and handed over as a u8 tensor, no file written."""
    import numpy as np
    import openvino as ov
    import openvino_genai as ov_genai
    import torch
    from safetensors.torch import save

    tensors = {_peft_key(k): v.detach().to(torch.float32).contiguous().cpu() for k, v in state_dict.items()}
    blob = save(tensors)
    return ov_genai.Adapter(ov.Tensor(np.frombuffer(blob, dtype=np.uint8).copy()))


def temperature_ir(ir_dir: Path, temperature: float) -> Path:
    """A copy of the IR whose logits are divided by `temperature` (a Multiply before the `logits` output; the weights
    are saved again, the other files linked), in a temporary directory: sampled at temperature 1, the engine draws
    from softmax(logits / T) and its (raw) logprobs are log softmax(logits / T), the quantity TRL recomputes."""
    import os
    import tempfile

    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    out = Path(tempfile.mkdtemp(prefix=f"termagent-ir-t{temperature:g}-"))
    for f in ir_dir.iterdir():
        if not f.name.startswith("openvino_model."):
            os.symlink(f.resolve(), out / f.name)
    model = ov.Core().read_model(str(ir_dir / "openvino_model.xml"))
    result = next(r for r in model.get_results() if "logits" in r.input_value(0).get_names())
    logits = result.input_value(0)
    scaled = ops.multiply(logits, ops.constant(np.array(1.0 / temperature, dtype=np.float32)))
    result.input(0).replace_source_output(scaled.output(0))
    logits.set_names(set())
    scaled.output(0).set_names({"logits"})
    ov.save_model(model, str(out / "openvino_model.xml"), compress_to_fp16=False)
    return out


def _peft_key(key: str) -> str:
    """`get_peft_model_state_dict` keys carry no adapter name; a raw `state_dict()` has `.default.`: drop it."""
    return key.replace(".lora_A.default.", ".lora_A.").replace(".lora_B.default.", ".lora_B.")


def lora_scale(adapter_config: dict) -> float:
    """PEFT's LoRA scaling (lora_alpha / r; rsLoRA: lora_alpha / sqrt(r)): OpenVINO's `alpha` multiplies B @ A."""
    r, alpha = adapter_config["r"], adapter_config.get("lora_alpha", adapter_config["r"])
    if adapter_config.get("rank_pattern") or adapter_config.get("alpha_pattern"):
        raise PolicyError("openvino policy: adapters with rank_pattern/alpha_pattern are not supported")
    return alpha / (r ** 0.5 if adapter_config.get("use_rslora") else r)


@dataclass
class _Call:
    handles: list
    prompts: list[list[int]]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class OpenVINOPolicy(TokenPolicy):
    def __init__(
        self,
        ir_dir: str | Path,
        tokenizer: str | Path | None = None,
        adapter: str | Path | None = None,
        context_limit: int | None = None,
        max_batch: int = 8,
        top_k: int = 0,
        name: str | None = None,
        precision: str = "auto",
        kv_cache_gb: float = 2.0,
        prefix_caching: bool = True,
        adapter_mode: str = "runtime",
        threads: int = 0,
        logit_temperature: float = 1.0,
    ):
        import openvino_genai as ov_genai
        from transformers import AutoTokenizer, GenerationConfig

        from termagent.policy.hf import _install_template

        self.ir_dir = Path(ir_dir)
        if not (self.ir_dir / "openvino_model.xml").is_file():
            raise PolicyError(f"openvino policy: {self.ir_dir} has no openvino_model.xml (run `dvc repro "
                              "export_openvino`: the OpenVINO IR of models/base)")
        if precision not in PRECISIONS:
            raise PolicyError(f"openvino policy: precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
        if adapter_mode not in ADAPTER_MODES:
            raise PolicyError(f"openvino policy: adapter_mode must be one of {ADAPTER_MODES}, got {adapter_mode!r}")
        self.adapter = Path(adapter) if adapter else None
        if self.adapter and not (self.adapter / "adapter_model.safetensors").is_file():
            raise PolicyError(f"openvino policy: adapter {self.adapter} has no adapter_model.safetensors")
        tokenizer_dir = Path(tokenizer) if tokenizer else self._source_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        _install_template(self.tokenizer, tokenizer_dir)
        self.name = name or self.ir_dir.name + (f"+{self.adapter.name}" if self.adapter else "")
        self.max_batch, self.top_k = max_batch, top_k
        self.precision, self.adapter_mode = precision, adapter_mode
        config = json.loads((self.ir_dir / "config.json").read_text())
        self.context_limit = context_limit or config.get("max_position_embeddings")
        eos = GenerationConfig.from_pretrained(str(self.ir_dir)).eos_token_id
        eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
        self.eos_ids = sorted({*eos, self.tokenizer.eos_token_id} - {None})

        self.kv_cache_gb, self.prefix_caching = kv_cache_gb, bool(prefix_caching)
        if logit_temperature <= 0:
            raise PolicyError(f"openvino policy: logit_temperature must be > 0, got {logit_temperature}")
        self.logit_temperature = float(logit_temperature)
        self._model_dir = self.ir_dir if self.logit_temperature == 1.0 else temperature_ir(self.ir_dir,
                                                                                           self.logit_temperature)
        self._properties: dict = {}
        if PRECISIONS[precision]:
            self._properties["INFERENCE_PRECISION_HINT"] = PRECISIONS[precision]
        if threads:
            self._properties["INFERENCE_NUM_THREADS"] = int(threads)
        self._lock = threading.Lock()  # the pipeline: add_request and step never overlap
        self._wake = threading.Condition(self._lock)
        self._calls: collections.deque[_Call] = collections.deque()
        self._next_id = 0
        self._closed = False
        self.stats: collections.Counter = collections.Counter()
        fused = None
        if self.adapter:
            fused = ov_genai.Adapter(str(self.adapter / "adapter_model.safetensors"))
            cfg = json.loads((self.adapter / "adapter_config.json").read_text())
            fused = ov_genai.AdapterConfig(fused, lora_scale(cfg), ov_genai.AdapterConfig.Mode.MODE_FUSE)
        self._pipe = self._build(fused)
        self._worker = threading.Thread(target=self._serve, name="openvino-engine", daemon=True)
        self._worker.start()

    def _source_dir(self) -> Path:
        """The transformers directory the IR was exported from (its manifest says), for the tokenizer."""
        manifest = self.ir_dir / "manifest.json"
        if manifest.is_file():
            source = Path(json.loads(manifest.read_text())["source"])
            if (source / "tokenizer_config.json").is_file():
                return source
        if (self.ir_dir / "tokenizer_config.json").is_file():
            return self.ir_dir
        raise PolicyError(f"openvino policy: no tokenizer for {self.ir_dir}: pass tokenizer=DIR (models/base)")

    def _build(self, adapters=None, *, prefix_caching: bool | None = None):
        import openvino_genai as ov_genai

        scheduler = ov_genai.SchedulerConfig()
        scheduler.cache_size = max(1, round(self.kv_cache_gb))  # GB of KV blocks
        scheduler.enable_prefix_caching = self.prefix_caching if prefix_caching is None else prefix_caching
        scheduler.max_num_seqs = max(int(self.max_batch), 1)
        properties = dict(self._properties)
        if adapters is not None:
            properties["adapters"] = adapters
        return ov_genai.ContinuousBatchingPipeline(str(self._model_dir), scheduler, "CPU", properties)

    # -- tokens ----------------------------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    @property
    def unpadded(self) -> bool:
        return True  # every request prefills alone: prompts of any length batch well

    # -- live adapters (RL) --------------------------------------------------------------------------
    def set_adapter(self, state_dict: dict, scale: float) -> None:
        """Generate with these LoRA weights from the next request on (a trainer's adapter after an optimizer step):
        `runtime` sets the in-memory adapter on the running pipeline (no rebuild); `fuse` rebuilds the pipeline with
        it fused into the weights. Requests still running finish on the old weights first.
        The prefix cache would hand the new weights keys/values computed under the old ones, and the pipeline has no
        way to empty it: a fused rebuild starts with an empty cache (prefix caching stays on within a step), runtime
        mode runs without prefix caching."""
        import numpy as np
        import openvino as ov
        import openvino_genai as ov_genai

        mode = ov_genai.AdapterConfig.Mode.MODE_FUSE if self.adapter_mode == "fuse" else None
        config = (ov_genai.AdapterConfig(adapter_from_state_dict(state_dict), float(scale), mode) if mode
                  else ov_genai.AdapterConfig(adapter_from_state_dict(state_dict), float(scale)))
        with self._wake:
            while self._calls:
                self._wake.wait(0.05)
            if mode is not None or not self._runtime_lora:
                self._pipe = None  # the old pipeline's memory goes before the new one's comes
                self._pipe = self._build(config, prefix_caching=self.prefix_caching if mode else False)
                self._runtime_lora = mode is None
            if mode is None:
                # Only `generate` hands a request's adapters to the model (add_request + step use the ones last set):
                # one token through it sets the new adapter's tensors for the steps that follow.
                primer = self._config(1, 0.0, 1.0, 0)
                primer.adapters = config
                self._pipe.generate([ov.Tensor(np.asarray([[self.eos_ids[0]]], dtype=np.int64))], [primer])
            self.stats.update(adapter_updates=1)

    _runtime_lora = False  # the pipeline was built for runtime LoRA (set_adapter in runtime mode)

    # -- generation ------------------------------------------------------------------------------------
    def generate_ids(self, prompts: list[list[int]], *, max_tokens: int, temperature: float,
                     seed: int | None = None, top_p: float = 1.0) -> list[Generation]:
        """Token in, token out: each prompt (ids) a request of the running batch; returns when all have ended."""
        import numpy as np
        import openvino as ov

        if not prompts:
            return []
        if any(not p for p in prompts):
            raise PolicyError("openvino policy: an empty prompt (no token ids) cannot be completed")
        base_seed = seed if seed is not None else random.getrandbits(31)
        configs = [self._config(max_tokens, temperature, top_p, base_seed + row) for row in range(len(prompts))]
        with self._wake:
            if self._closed:
                raise PolicyError("openvino policy: generate after close()")
            handles = []
            for prompt, config in zip(prompts, configs):
                ids = ov.Tensor(np.asarray([prompt], dtype=np.int64))
                handles.append(self._pipe.add_request(self._next_id, ids, config))
                self._next_id += 1
            call = _Call(handles, [list(p) for p in prompts])
            self._calls.append(call)
            self.stats.update(rows=len(prompts), prompt_tokens=sum(len(p) for p in prompts))
            self._wake.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return [self._generation(prompt, handle, temperature) for prompt, handle in zip(call.prompts, call.handles)]

    def _config(self, max_tokens: int, temperature: float, top_p: float, seed: int):
        import openvino_genai as ov_genai

        config = ov_genai.GenerationConfig()
        config.max_new_tokens = int(max_tokens)
        config.stop_token_ids = set(self.eos_ids)
        config.ignore_eos = False
        config.logprobs = 1  # the sampled token's logprob
        config.do_sample = temperature > 0
        if config.do_sample:  # the IR's logits are already divided by logit_temperature
            config.temperature = float(temperature) / self.logit_temperature
            config.top_p, config.top_k = float(top_p), int(self.top_k)
        config.rng_seed = int(seed) & 0x7FFFFFFF
        return config

    def _serve(self) -> None:
        """The engine thread: step the pipeline while any request runs; wake the callers whose requests all ended."""
        import openvino_genai as ov_genai

        running = ov_genai.GenerationStatus.RUNNING
        while True:
            with self._wake:
                while not self._calls and not self._closed:
                    self._wake.wait()
                if self._closed and not self._calls:
                    return
                try:
                    self._pipe.step()
                    self.stats.update(steps=1)
                    error = None
                except BaseException as e:  # noqa: BLE001 (handed to every waiting caller)
                    error = e
                done = [c for c in self._calls if error is not None
                        or all(h.get_status() != running for h in c.handles)]
                for call in done:
                    self._calls.remove(call)
                    call.error = error and PolicyError(f"openvino engine step failed: {error}")
                    call.done.set()
                self._wake.notify_all()

    def _generation(self, prompt: list[int], handle, temperature: float) -> Generation:
        outputs = handle.read_all()
        if len(outputs) != 1:
            raise PolicyError(f"openvino policy: expected one output per request, got {len(outputs)}")
        out = outputs[0]
        ids = list(out.generated_ids)
        # OpenVINO's logprobs are raw: log softmax of the model's logits before temperature (checked against torch).
        # That is the policy's quantity, log softmax(logits / T), only where the IR's own scaling is T (greedy: 1);
        # elsewhere none is reported rather than a wrong one (TRL's importance ratio then treats them as on-policy).
        raw_is_processed = abs((temperature if temperature > 0 else 1.0) - self.logit_temperature) < 1e-6
        logprobs = (list(out.generated_log_probs)
                    if raw_is_processed and len(out.generated_log_probs) == len(ids) else None)
        stopped = bool(ids) and ids[-1] in self.eos_ids
        self.stats.update(completion_tokens=len(ids))
        return Generation(
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            finish_reason="stop" if stopped else "length",
            prompt_tokens=len(prompt), completion_tokens=len(ids),
            prompt_ids=list(prompt), completion_ids=ids, logprobs=logprobs,
        )

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._worker.join()
        self._pipe = None
        if self._model_dir != self.ir_dir:
            import shutil

            shutil.rmtree(self._model_dir, ignore_errors=True)


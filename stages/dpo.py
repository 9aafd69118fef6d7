"""DVC stage `dpo`: DPO from the SFT adapter, the SFT policy as the reference (TRL's "ref" adapter copy).

    python stages/dpo.py --base models/base --sft models/sft --out models/dpo --metrics-dir metrics/dpo

Reads params: dpo (termagent.train.dpo.DPOParams; the data files are dpo.datasets). Empty input fails unless
dpo.skip_if_empty. Writes models/dpo/ (adapter + tokenizer), metrics/dpo/train.json (pairs read / used /
dropped for length), metrics/dpo/dvclive/, metrics/dpo/curves.png.
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from termagent.models.artifact import resolve_base
from termagent.params import profile_option, read_sections
from termagent.train.common import relaunch_distributed
from termagent.train.dpo import DPOParams, train_dpo


@click.command()
@profile_option
@click.option("--base", "base_dir", default="models/base", show_default=True, type=click.Path(path_type=Path))
@click.option("--sft", "sft_dir", default="models/sft", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="models/dpo", show_default=True, type=click.Path(path_type=Path))
@click.option("--metrics-dir", default="metrics/dpo", show_default=True, type=click.Path(path_type=Path))
@click.option("--curves", "curves_png", default=None, type=click.Path(path_type=Path),
              help="Training curves PNG (default: <metrics-dir>/curves.png).")
def main(params_file: Path, profile: str | None, base_dir: Path, sft_dir: Path, out: Path, metrics_dir: Path, curves_png: Path | None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = read_sections(params_file, profile, dpo=DPOParams).dpo
    relaunch_distributed()  # NUM_GPUS > 1: re-exec under `accelerate launch` (configured, not run here: no GPU)
    try:
        m = train_dpo(resolve_base(base_dir), sft_dir, out, cfg, metrics_dir=metrics_dir, curves_png=curves_png)
    except (FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from e
    if m["skipped"]:
        click.echo(f"{out}: DPO skipped (empty input {m['pairs']}); the SFT adapter passed through")
    else:
        loss = " -> ".join("n/a" if x is None else f"{x:.4f}" for x in (m["first_loss"], m["last_loss"]))
        click.echo(f"{out}: pairs {m['pairs']}, {m['global_steps']} steps, loss {loss}, "
                   f"{m['adapter_tensors_changed']}/{m['adapter_tensors']} adapter tensors changed")


if __name__ == "__main__":
    main()

"""Stage `image`: build the sandbox base image (unless its recipe-hash tag exists) and record it.

    python stages/image.py --out data/image.json --local data/image.local.json     (dvc repro image)

--out, the record every task-running stage depends on: {image, recipe, recipe_hash, suite, packages,
installed}: the recipe and the package versions resolved inside the image, so it is byte-identical on
every machine that builds the same recipe from the same mirror. --local: this machine's image id and
size (differ on every build; no stage depends on it). Reads params: sandbox.recipe, suite, image_name.
"""

from __future__ import annotations

from pathlib import Path

import click

from termagent import atomic
from termagent.params import profile_option, read_sections
from termagent.sandbox.image import ensure_base_image
from termagent.sandbox.settings import SandboxParams


@click.command()
@profile_option
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("data/image.json"),
              show_default=True)
@click.option("--local", "local_out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("data/image.local.json"), show_default=True)
def main(params_file: Path, profile: str | None, out: Path, local_out: Path) -> None:
    params = read_sections(params_file, profile, sandbox=SandboxParams).sandbox
    base = ensure_base_image(params.base_recipe())
    atomic.write_json(out, base.record())
    atomic.write_json(local_out, base.local())
    click.echo(f"{base.tag} {'built' if base.built else 'present'} ({len(base.installed)} packages) -> {out}")


if __name__ == "__main__":
    main()

"""`termagent image ...`: build the sandbox base image, remove containers left by crashed runs."""

from __future__ import annotations

import logging

import click


@click.group()
def image() -> None:
    """The sandbox base image (its tag carries a hash of the recipe) and container cleanup."""


@image.command()
@click.option("--recipe", type=click.Choice(["debootstrap", "dockerfile", "auto"]), default=None,
              help="Override sandbox.recipe of params.yaml.")
@click.option("--params", "params_file", default="params.yaml", show_default=True,
              help="Where the sandbox: section is read from (defaults apply when absent).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the tag.")
def build(recipe: str | None, params_file: str, quiet: bool) -> None:
    """Build the base image unless its tag exists; print the tag."""
    from dataclasses import replace

    from termagent.params import read_sections
    from termagent.sandbox.errors import SandboxError
    from termagent.sandbox.image import ensure_base_image
    from termagent.sandbox.settings import SandboxParams

    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format="%(message)s")
    spec = read_sections(params_file, missing_ok=True, sandbox=SandboxParams).sandbox.base_recipe()
    if recipe:
        spec = replace(spec, recipe=recipe)
    try:
        base = ensure_base_image(spec, progress=not quiet)
    except SandboxError as e:
        raise click.ClickException(str(e)) from e
    if not quiet:
        verb = f"built in {base.build_s:.0f} s" if base.built else "already present"
        click.echo(f"{base.tag} ({verb}, {base.size_bytes / 1e6:.0f} MB, {base.id[:19]}, {len(base.installed)} packages); alias {spec.latest}",
                   err=True)
    click.echo(base.tag)


@image.command()
def reap() -> None:
    """Remove termagent containers whose owner process is dead (live runs are left alone)."""
    from termagent.sandbox.reaper import reap as reap_containers

    removed = reap_containers()
    click.echo(f"removed {len(removed)} container(s)" + (f": {' '.join(removed)}" if removed else ""))

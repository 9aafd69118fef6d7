"""Switch params.yaml to a profile: deep-merge profiles/<name>.yaml over it, keeping comments.

    python scripts/apply_profile.py h100        # or: make profile-h100
    git checkout params.yaml             # back to the embedded default

The merge is termagent.params.merge_profile, the same one `--profile NAME` applies when a stage reads
params (`python stages/eval.py --model base --profile h100` reads exactly what this script writes).
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click
from ruamel.yaml import YAML

from termagent import atomic
from termagent.params import ParamsError, merge_profile, profile_path


@click.command()
@click.argument("name")
@click.option("--params", "params_path", default="params.yaml", show_default=True)
def main(name: str, params_path: str) -> None:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # keep every line as written (ruamel folds long flow lists at 80 columns)
    # null stays `null` (ruamel writes an empty value, which reads the same but not as the file had it)
    yaml.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    try:
        path = profile_path(name)
        params = yaml.load(Path(params_path).read_text())
        merge_profile(params, yaml.load(path.read_text()) or {})
    except ParamsError as e:
        raise click.ClickException(str(e)) from e
    text = io.StringIO()
    yaml.dump(params, text)
    atomic.write_text(params_path, text.getvalue())
    click.echo(f"{params_path}: profile '{name}' applied ({path})")


if __name__ == "__main__":
    sys.exit(main())

"""Build configs/dvc_plots_template.html: DVC's plots page with vega, vega-lite and vega-embed inlined, so
`dvc plots show` renders the dvclive curves offline (`plots.html_template` in .dvc/config points at it).

    python scripts/build_plots_template.py            # npm pack the pinned packages, check, write the template
    python scripts/build_plots_template.py --from DIR # the same from tarballs already in DIR (offline)

DVC's vega renderer (dvc-render) inserts CDN script tags for vega@5.20.2, vega-lite@5.2.0 and vega-embed@6.18.2
through the template's `{scripts}` placeholder. This template has no `{scripts}` placeholder (dvc-render then
inserts nothing) and carries the same versions' minified builds instead, taken from the npm packages pinned
below, each tarball checked against its npm integrity (sha512). The versions are dvc-render's own:
tests/test_plots_template.py fails when an upgraded dvc-render asks for others.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import click

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from termagent import atomic

TEMPLATE = REPO / "configs" / "dvc_plots_template.html"

# (package, version, file in the tarball, npm integrity of the tarball), in load order.
PACKAGES = (
    ("vega", "5.20.2", "package/build/vega.min.js",
     "sha512-qmH7aD9GGPpssVdxL1xgcdxTbQzyRUeRR16Os385ymvQhiwCYQNA6+eXUPAZDTVLfk0RXu6Jzj6kUE5jQ80EVw=="),
    ("vega-lite", "5.2.0", "package/build/vega-lite.min.js",
     "sha512-Yxcg8MvYfxHcG6BbkaKT0oVCIMIcE19UvqIsEwBmyd/7h2nzW7oRnID81T8UrY7hpDrIr6wa2JADOT2dhGNErw=="),
    ("vega-embed", "6.18.2", "package/build/vega-embed.min.js",
     "sha512-wcDyQPE4J5aiCDc3/suH5RQDvrKkjuLkhzUcbOLwEkNF8/+pp17tS0JghzEvAPNRg+5aG1/N2ydixq8Lk3dOlg=="),
)

# dvc-render's page (dvc_render/html.py PAGE_HTML) with the libraries in place of `{scripts}`.
PAGE = """<!DOCTYPE html>
<html>
<head>
    {{refresh_tag}}
    <title>DVC Plot</title>
    <!-- Built by scripts/build_plots_template.py from the npm packages {packages}; do not edit. -->
{libraries}
    <style>
        table {{
            border-spacing: 15px;
        }}
    </style>
</head>
<body>
    {{plot_divs}}
</body>
</html>
"""


def integrity(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def tarball(name: str, version: str, source: Path | None, tmp: Path) -> Path:
    """The package's tarball: from `source` if given, else `npm pack` (the npm client's configured registry)."""
    filename = f"{name}-{version}.tgz"
    if source is not None:
        path = source / filename
        if not path.is_file():
            raise click.ClickException(f"{path}: not found (npm pack {name}@{version} writes it)")
        return path
    subprocess.run(["npm", "pack", "--silent", f"{name}@{version}"], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
    return tmp / filename


def script_tag(name: str, version: str, js: str) -> str:
    if "{plot_divs}" in js or "{refresh_tag}" in js or "{scripts}" in js:
        raise click.ClickException(f"{name}@{version}: the build holds a dvc-render placeholder")
    # A `</script` inside the code would close the tag early; `<\/script` is the same string to JavaScript.
    js = js.replace("</script", "<\\/script")
    return f'    <script data-package="{name}@{version}">\n{js}\n    </script>'


@click.command()
@click.option("--from", "source", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder holding the pinned tarballs (NAME-VERSION.tgz) instead of running npm pack.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=TEMPLATE, show_default=True)
def main(source: Path | None, out: Path) -> None:
    tags = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, version, member, expected in PACKAGES:
            path = tarball(name, version, source, Path(tmp))
            if integrity(path) != expected:
                raise click.ClickException(f"{path}: integrity {integrity(path)} is not the pinned {expected}")
            with tarfile.open(path) as tar:
                js = tar.extractfile(member).read().decode("utf-8")
            tags.append(script_tag(name, version, js))
    packages = ", ".join(f"{name}@{version}" for name, version, _, _ in PACKAGES)
    atomic.write_text(out, PAGE.format(packages=packages, libraries="\n".join(tags)))
    click.echo(f"{out}: {packages} inlined ({out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()

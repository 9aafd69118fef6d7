"""Plots offline: `dvc plots show` renders with configs/dvc_plots_template.html (plots.html_template in .dvc/config),
which carries vega, vega-lite and vega-embed inlined instead of dvc-render's CDN script tags; every plot in dvc.yaml
is declared once, with labelled axes, on series with more than one point.

    python -m pytest tests/test_plots_template.py -q
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "configs" / "dvc_plots_template.html"
sys.path.insert(0, str(REPO / "scripts"))

from build_plots_template import PACKAGES

EXTERNAL_SCRIPT = re.compile(r"<script[^>]*\bsrc\s*=", re.IGNORECASE)


def test_template_inlines_the_versions_dvc_render_asks_for():
    from dvc_render.vega import VegaRenderer

    wanted = dict(re.findall(r"/npm/([a-z-]+)@([0-9.]+)", VegaRenderer.SCRIPTS))
    assert wanted == {name: version for name, version, _, _ in PACKAGES}
    html = TEMPLATE.read_text()
    assert not EXTERNAL_SCRIPT.search(html)
    assert "{scripts}" not in html  # dvc-render would put its CDN tags there
    assert "{plot_divs}" in html and "{refresh_tag}" in html
    blocks = re.findall(r'<script data-package="([^"]+)">\n(.*?)\n    </script>', html, re.DOTALL)
    assert [package for package, _ in blocks] == [f"{name}@{version}" for name, version, _, _ in PACKAGES]
    for (package, js), (name, version, _, _) in zip(blocks, PACKAGES):
        assert len(js) > 50_000, package  # the minified library, not a reference to one
        assert f'"{version}"' in js, package
        assert "</script" not in js


def test_the_plots_config_points_at_the_template():
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        assert repo.config["core"]["analytics"] is False
        template = Path(repo.dvc_dir) / repo.config["plots"]["html_template"]
    assert template.resolve() == TEMPLATE


def declared_plots() -> tuple[list[dict], list[str]]:
    """dvc.yaml's top-level plot definitions, and every data file any plot declaration (top-level or a stage's) names."""
    dvc_yaml = yaml.safe_load((REPO / "dvc.yaml").read_text())
    top = [next(iter(entry.items())) if isinstance(entry, dict) else (entry, {}) for entry in dvc_yaml["plots"]]
    files = []
    for name, spec in top:
        files.extend((spec or {}).get("y", {}) if isinstance((spec or {}).get("y"), dict) else [name])
    for stage in dvc_yaml["stages"].values():
        for entry in stage.get("plots", []):
            files.append(next(iter(entry)) if isinstance(entry, dict) else entry)
    return [dict(name=name, **(spec or {})) for name, spec in top], files


def test_each_plot_is_declared_once_with_labelled_axes():
    plots, files = declared_plots()
    assert [f for f, n in Counter(files).items() if n > 1] == []
    for path in files:
        assert (REPO / path).is_file(), f"{path}: a plot of a file, never of a whole dvclive folder"
        if path.endswith(".tsv"):
            assert len((REPO / path).read_text().splitlines()) > 2, f"{path}: a single-point series"
    for plot in plots:
        if not plot["name"].endswith(".png"):
            assert plot.get("title") and plot.get("x_label") and plot.get("y_label"), plot["name"]


def test_dvc_plots_show_writes_a_page_that_loads_nothing_from_the_network(tmp_path):
    out = tmp_path / "plots"
    run = subprocess.run([str(Path(sys.executable).parent / "dvc"), "plots", "show", "-o", str(out)],
                         cwd=REPO, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    html = (out / "index.html").read_text()
    assert not EXTERNAL_SCRIPT.search(html)
    assert "cdn." not in html
    plots, _ = declared_plots()
    images = [p["name"] for p in plots if p["name"].endswith(".png")]
    stage_plots = sum(len(stage.get("plots", [])) for stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].values())
    assert html.count("vegaEmbed(") == len(plots) - len(images) + stage_plots
    rendered = re.findall(r'<img src="(static/[^"]+)"', html)
    assert len(rendered) == len(images)
    assert all((out / image).is_file() for image in rendered)

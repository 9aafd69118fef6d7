"""DVC stage `export_openvino`: models/base -> models/base_openvino, the OpenVINO IR the CPU engine generates with.

    python stages/export_openvino.py                  # what `dvc repro export_openvino` runs
    python stages/export_openvino.py --base models/base --out models/base_openvino

The exporter (optimum-intel) needs transformers < 5.6 while the project pins 5.25, so it runs in a venv of its own,
.venv-openvino-export (scripts/openvino_export_venv.sh, pinned by constraints-openvino-export.txt; the stage's command
builds it first, a no-op once stamped). `optimum-cli export openvino --task text-generation-with-past
--weight-format fp32`: the weights stay fp32, the engine picks its compute precision at load (termagent.policy.openvino).
The tokenizer IR optimum writes beside the model is never used to make prompt ids: the engine is fed the ids the
project's own tokenizer and chat template render (token-in/token-out). manifest.json records the source model's
manifest digest and every pinned version of the exporter. Reads params: eval.policy, engine.rl: a profile that uses the
engine nowhere (the H100 one serves with vLLM) exports nothing, and the output says so (skipped.json), so an 8B model is
not converted for nothing.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import click

from termagent import atomic
from termagent.params import load_params, profile_option

EXPORT_VENV = Path(".venv-openvino-export")
PINNED = ("optimum-intel", "optimum", "openvino", "openvino-tokenizers", "transformers", "torch", "nncf")
IR_FILES = ("openvino_model.xml", "openvino_model.bin")


def export_versions(venv: Path) -> dict[str, str]:
    """The exporter's package versions, read inside its venv."""
    code = ("import importlib.metadata as m, json; "
            f"print(json.dumps({{p: m.version(p) for p in {list(PINNED)!r}}}))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def export_ir(base: Path, out: Path, *, venv: Path = EXPORT_VENV, log=click.echo) -> dict:
    """Export `base` (a transformers directory) to an OpenVINO IR in `out` (atomically), with manifest.json."""
    if not (base / "config.json").is_file():
        raise click.ClickException(f"{base}: no config.json (not a transformers model directory)")
    cli = venv / "bin" / "optimum-cli"
    if not cli.is_file():
        raise click.ClickException(f"{cli} missing: run `bash scripts/openvino_export_venv.sh` (make openvino-export-venv)")
    started = time.monotonic()
    with atomic.staged_dir(out) as staging:
        cmd = [str(cli), "export", "openvino", "-m", str(base), "--task", "text-generation-with-past",
               "--weight-format", "fp32", str(staging)]
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise click.ClickException(f"optimum-cli export failed ({run.returncode}):\n{run.stderr[-4000:]}")
        missing = [f for f in IR_FILES if not (staging / f).is_file()]
        if missing:
            raise click.ClickException(f"optimum-cli wrote no {', '.join(missing)} in {out}")
        base_manifest = base / "manifest.json"
        manifest = {
            "source": str(base),
            "source_manifest_sha256": (hashlib.sha256(base_manifest.read_bytes()).hexdigest()
                                       if base_manifest.is_file() else None),
            "task": "text-generation-with-past", "weight_format": "fp32",
            "exporter": export_versions(venv),
            "constraints": "constraints-openvino-export.txt",
            "export_s": round(time.monotonic() - started, 1),
            "ir_bytes": sum(f.stat().st_size for f in staging.iterdir() if f.is_file()),
        }
        atomic.write_json(staging / "manifest.json", manifest)
    log(f"{out}: OpenVINO IR of {base} in {manifest['export_s']} s "
        f"(optimum-intel {manifest['exporter']['optimum-intel']}, openvino {manifest['exporter']['openvino']})")
    return manifest


def write_skipped(out: Path, reason: str) -> None:
    with atomic.staged_dir(out) as staging:
        atomic.write_json(staging / "skipped.json", {"exported": False, "reason": reason})
    click.echo(f"{out}: not exported ({reason})")


@click.command()
@profile_option
@click.option("--base", default="models/base", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", default="models/base_openvino", show_default=True, type=click.Path(path_type=Path))
@click.option("--venv", default=str(EXPORT_VENV), show_default=True, type=click.Path(path_type=Path))
def main(params_file: Path, profile: str | None, base: Path, out: Path, venv: Path) -> None:
    # two keys read raw: importing the typed sections would make every policy/eval code change re-export the model
    params = load_params(params_file, profile)
    policy, rl = params.get("eval", {}).get("policy", "hf"), params.get("engine", {}).get("rl", False)
    if policy != "openvino" and not rl:
        return write_skipped(out, f"eval.policy is {policy} and engine.rl is off: nothing generates on the engine")
    export_ir(base, out, venv=venv)


if __name__ == "__main__":
    main()

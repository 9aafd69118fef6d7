"""The `warmup` stage: where GRPO and SFT start. On the embedded profile a short LoRA SFT on the demos (the SFT
code): models/warmup is that adapter, which SFT continues and GRPO trains on; on the H100 profile warmup is off
and both start from the base model. Either way models/warmup/ holds `start.json`, which `resolve_start` reads:
{"start_from": "adapter" | "base", "base": DIR, "adapter": DIR|null}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from termagent import atomic
from termagent.train.sft import SFTParams

START_FILE = "start.json"


@dataclass
class WarmupParams(SFTParams):
    enabled: bool = False  # off: GRPO starts from the base model (the H100 profile); on: a short SFT on the demos


def write_start(out_dir: str | Path, *, base_dir: str | Path, adapter: bool, metrics: dict | None = None) -> dict:
    """models/warmup/start.json: start from the adapter the warmup wrote to `out_dir`, or from the base."""
    record = {"start_from": "adapter" if adapter else "base", "base": str(base_dir),
              "adapter": str(out_dir) if adapter else None, "metrics": metrics}
    out_dir = Path(out_dir)
    if adapter:
        atomic.write_json(out_dir / START_FILE, record)
    else:
        with atomic.staged_dir(out_dir) as staging:  # no stale adapter may survive a switch to "off"
            atomic.write_json(staging / START_FILE, record)
    return record


OFF_REASON = "warmup.enabled false: no warmup model was trained; GRPO starts from the base model"


def write_disabled(out_dir: str | Path, *, base_dir: str | Path, metrics_dir: str | Path,
                   curves_png: str | Path | None = None) -> dict:
    """The warmup stage with `warmup.enabled: false` (the H100 profile): every output dvc.yaml declares, none
    of them a metric of training that did not happen. `out_dir`/start.json names the base GRPO starts from;
    metrics_dir/train.json says `enabled: false` and why; metrics_dir/dvclive holds only skipped.json (no
    curve); the curves PNG says the warmup is off. warmup_eval then evaluates nothing (the base is base_eval's)
    and the report leaves the warmup row out, saying why. Returns the start record."""
    from termagent.train.common import plot_curves, write_stage_metrics

    record = write_start(out_dir, base_dir=base_dir, adapter=False)
    metrics_dir = Path(metrics_dir)
    with atomic.staged_dir(metrics_dir / "dvclive") as staging:  # no curve of an earlier enabled run survives
        atomic.write_json(staging / "skipped.json", {"skipped": OFF_REASON, "start": record})
    plot_curves(metrics_dir, curves_png or metrics_dir / "curves.png", "warmup: off", note=OFF_REASON)
    write_stage_metrics(metrics_dir / "train.json", "warmup", enabled=False, skipped=OFF_REASON, start=record)
    return record


def resolve_start(warmup_dir: str | Path = "models/warmup") -> tuple[Path, Path | None]:
    """(base model dir, adapter dir or None) GRPO starts from, as the warmup stage recorded it."""
    path = Path(warmup_dir) / START_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (run `dvc repro warmup`)")
    record = json.loads(path.read_text())
    if record.get("start_from") not in ("adapter", "base"):
        raise ValueError(f"{path}: start_from must be 'adapter' or 'base', got {record.get('start_from')!r}")
    adapter = Path(record["adapter"]) if record["start_from"] == "adapter" else None
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{path}: names adapter {adapter}, which has no adapter_config.json")
    return Path(record["base"]), adapter


def resolve_base(path: str | Path) -> Path:
    """The base model directory under `path`: a warmup directory (it holds start.json) stands for the base it
    records; any other path is a model directory itself."""
    return resolve_start_model(path)[0]


def resolve_start_model(path: str | Path) -> tuple[Path, Path | None]:
    """(base model dir, adapter dir or None) a stage given `path` starts from: a warmup directory gives its
    record (the base, and the warmup adapter when it trained one); any other path is a model directory."""
    path = Path(path)
    if (path / START_FILE).is_file():
        return resolve_start(path)
    return path, None

"""What a `models/<name>` directory is: the one place that reads and writes its records and says which weights
it stands for.

A model directory is one of
- a full model (`config.json`, no `adapter_config.json`): `models/base`, or a merged model;
- a LoRA adapter (`adapter_config.json`) on a base: the base its `base_model_name_or_path` names when that is a
  local model directory, else `models/base`;
- a start record only (`start.json` with `start_from: base`): the warmup stage with `warmup.enabled: false`, which
  trained nothing; it stands for the base it names.

Two records live beside the weights (their formats are fixed: training stages write them, dvc.lock hashes them):
- `start.json` (the warmup stage; `write_start`): `{"start_from": "adapter" | "base", "base": DIR,
  "adapter": DIR | null, "metrics": {...} | null}`: where GRPO and SFT start.
- `manifest.json` (every stage that saves weights): free-form, but a stage that trained nothing and saved the
  adapter it started from unchanged (DPO without a pair) writes `"skipped"` and `"init_adapter"`.

    art = ModelArtifact.open("sft")            # models/sft: an adapter on models/base
    art.base, art.adapter                      # (Path("models/base"), Path("models/sft")), read on first use
    art.not_evaluated()                        # None: a trained model, its eval stage evaluates it
    base, adapter = resolve_start_model("models/warmup")   # where a training stage given --base starts
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from termagent import atomic

START_FILE = "start.json"
MANIFEST_FILE = "manifest.json"
MODELS_DIR = Path("models")


def read_record(path: Path) -> Any:
    """A JSON record of a model directory; a broken one fails naming the file."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None


# -- start.json: where training starts -------------------------------------------------------------------------

def write_start(out_dir: str | Path, *, base_dir: str | Path, adapter: bool, metrics: dict | None = None) -> dict:
    """`out_dir`/start.json: start from the adapter written to `out_dir` (adapter=True), or from `base_dir`.
    Starting from the base replaces `out_dir` whole, so no stale adapter survives a switch to "off"."""
    record = {"start_from": "adapter" if adapter else "base", "base": str(base_dir),
              "adapter": str(out_dir) if adapter else None, "metrics": metrics}
    out_dir = Path(out_dir)
    if adapter:
        atomic.write_json(out_dir / START_FILE, record)
    else:
        with atomic.staged_dir(out_dir) as staging:
            atomic.write_json(staging / START_FILE, record)
    return record


def resolve_start(start_dir: str | Path = "models/warmup") -> tuple[Path, Path | None]:
    """(base model dir, adapter dir or None) that `start_dir`/start.json records."""
    path = Path(start_dir) / START_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (run `dvc repro warmup`)")
    record = read_record(path)
    if not isinstance(record, dict) or record.get("start_from") not in ("adapter", "base"):
        got = record.get("start_from") if isinstance(record, dict) else record
        raise ValueError(f"{path}: start_from must be 'adapter' or 'base', got {got!r}")
    adapter = Path(record["adapter"]) if record["start_from"] == "adapter" else None
    if adapter is not None and not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{path}: names adapter {adapter}, which has no adapter_config.json")
    return Path(record["base"]), adapter


def resolve_start_model(path: str | Path) -> tuple[Path, Path | None]:
    """(base model dir, adapter dir or None) a training stage given `path` starts from: a directory holding
    start.json gives its record; any other path is a model directory itself."""
    path = Path(path)
    if (path / START_FILE).is_file():
        return resolve_start(path)
    return path, None


def resolve_base(path: str | Path) -> Path:
    """The base model directory under `path` (see `resolve_start_model`)."""
    return resolve_start_model(path)[0]


# -- a models/<name> directory as one object -------------------------------------------------------------------

@dataclass(frozen=True)
class ModelArtifact:
    """One `models/<name>` directory, read once: whether it trained anything of its own (`untrained_start`,
    `passed_through`) and the weights it stands for (`base` + optional `adapter`, resolved on first use, so a
    caller can say "nothing to evaluate" or check its other inputs before any weights must exist)."""

    name: str
    path: Path
    models_dir: Path = MODELS_DIR
    untrained_start: dict | None = None  # start.json of a stage that trained nothing: the base under another name
    passed_through: dict | None = None  # manifest.json of a stage that saved its start adapter unchanged

    @classmethod
    def open(cls, name: str, models_dir: str | Path = MODELS_DIR) -> ModelArtifact:
        """Read the records of models_dir/<name> ("base" is models_dir/base itself)."""
        models_dir = Path(models_dir)
        path = models_dir / name
        start = _untrained_start(name, path)
        return cls(name, path, models_dir, untrained_start=start,
                   passed_through=None if start else _passed_through(name, path))

    @cached_property
    def weights(self) -> tuple[Path, Path | None]:
        """(base model directory, adapter directory or None). Fails naming the directory when it holds neither
        a model nor an adapter."""
        if self.untrained_start is not None:
            return Path(self.untrained_start["base"]), None
        return _weights(self.name, self.path, self.models_dir)

    @property
    def base(self) -> Path:
        """The full model directory whose weights are loaded."""
        return self.weights[0]

    @property
    def adapter(self) -> Path | None:
        """The LoRA adapter on `base`, if any."""
        return self.weights[1]

    def not_evaluated(self) -> tuple[str, dict] | None:
        """(reason, record) when this model's eval stage has nothing of its own to evaluate, else None: the
        untrained warmup is the base (eval@base's); a passed-through adapter is its start's (that start's eval)."""
        if self.untrained_start is not None:
            reason = (f"models/{self.name} trained no model of its own (start.json: start from "
                      f"{self.untrained_start.get('base')}), so there is nothing to evaluate: that model is "
                      f"eval@base's")
            return reason, self.untrained_start
        if self.passed_through is not None:
            manifest = self.passed_through
            start = Path(manifest["init_adapter"]).name
            reason = (f"models/{self.name} trained nothing of its own ({manifest['skipped']}): it is the adapter "
                      f"of {manifest['init_adapter']} unchanged, which eval@{start} evaluates")
            return reason, manifest
        return None


def untrained_start(name: str, models_dir: str | Path = MODELS_DIR) -> dict | None:
    """The start record of models_dir/<name> when that stage trained nothing (only start.json, starting from
    the base); None for any other model."""
    return _untrained_start(name, Path(models_dir) / name)


def passed_through(name: str, models_dir: str | Path = MODELS_DIR) -> dict | None:
    """The manifest of models_dir/<name> when that stage saved the adapter it started from unchanged
    (`"skipped"` + `"init_adapter"`); None for any other model."""
    return _passed_through(name, Path(models_dir) / name)


def model_dirs(name: str, models_dir: str | Path = MODELS_DIR) -> tuple[Path, Path | None]:
    """(base model directory, adapter directory or None) for a model name."""
    return ModelArtifact.open(name, models_dir).weights


def _untrained_start(name: str, path: Path) -> dict | None:
    start = path / START_FILE
    if name == "base" or not start.is_file() or any((path / f).is_file()
                                                   for f in ("config.json", "adapter_config.json")):
        return None
    record = read_record(start)
    return record if isinstance(record, dict) and record.get("start_from") == "base" else None


def _passed_through(name: str, path: Path) -> dict | None:
    manifest = path / MANIFEST_FILE
    if name == "base" or not manifest.is_file():
        return None
    record = read_record(manifest)
    if isinstance(record, dict) and record.get("skipped") and record.get("init_adapter"):
        return record
    return None


def _weights(name: str, path: Path, models_dir: Path) -> tuple[Path, Path | None]:
    full_model = (path / "config.json").is_file() and not (path / "adapter_config.json").is_file()
    if name == "base" or full_model:
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path}: no config.json (run `dvc repro {'base_model' if name == 'base' else name}`)")
        return path, None
    adapter_config = path / "adapter_config.json"
    if not adapter_config.is_file():
        raise FileNotFoundError(f"{path}: neither a model (config.json) nor an adapter (adapter_config.json)")
    named = read_record(adapter_config).get("base_model_name_or_path") or ""
    base = Path(named) if named and (Path(named) / "config.json").is_file() else models_dir / "base"
    return base, path

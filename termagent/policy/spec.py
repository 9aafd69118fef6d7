"""Which policy to build, as typed values: `HFSpec`, `OpenAISpec`, `ReplaySpec`, and `make_policy`, the one
factory. Code builds a spec directly (the eval: `HFSpec(model_dir=base, adapter=adapter, prefix_cache=16)`);
a command line's string is parsed once, at the edge, into the same dataclass:

    make_policy("hf:DIR[,adapter=DIR][,context_limit=N][,device=cpu][,max_batch=8][,prefix_cache=16]")
    make_policy("openvino:IR_DIR[,tokenizer=DIR][,adapter=DIR][,precision=auto|f32][,kv_cache_gb=2]")
    make_policy("openai:URL[,model=NAME][,tokenizer=DIR][,context_limit=N]...")
    make_policy("replay:FILE")

Options after the first comma are `key=value` pairs named like the spec's fields; keyword arguments to
`make_policy` override them (None values are ignored, so CLI flags pass through as they are). A misspelt key
or a value of the wrong type fails with PolicyError naming the spec.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path

from termagent.policy.base import Policy, PolicyError


@dataclass(frozen=True)
class HFSpec:
    """In-process transformers (+ a PEFT adapter): termagent.policy.hf.HFPolicy."""

    model_dir: Path
    adapter: Path | None = None
    tokenizer: Path | None = None
    context_limit: int | None = None
    device: str | None = None
    max_batch: int = 8
    top_k: int = 0
    name: str | None = None
    prefix_cache: int = 0
    dtype: str = "auto"

    def build(self) -> Policy:
        from termagent.policy.hf import HFPolicy

        return HFPolicy(**_fields(self))


@dataclass(frozen=True)
class OpenVINOSpec:
    """OpenVINO GenAI's continuous-batching engine on an exported IR: termagent.policy.openvino.OpenVINOPolicy."""

    ir_dir: Path
    tokenizer: Path | None = None
    adapter: Path | None = None
    context_limit: int | None = None
    max_batch: int = 8
    top_k: int = 0
    name: str | None = None
    precision: str = "auto"
    kv_cache_gb: float = 2.0
    prefix_caching: bool = True
    adapter_mode: str = "runtime"
    threads: int = 0
    logit_temperature: float = 1.0

    def build(self) -> Policy:
        from termagent.policy.openvino import OpenVINOPolicy

        return OpenVINOPolicy(**_fields(self))


@dataclass(frozen=True)
class OpenAISpec:
    """An OpenAI-compatible server: termagent.policy.openai_compat.OpenAIPolicy."""

    url: str
    model: str | None = None
    tokenizer: Path | None = None
    context_limit: int | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_retries: int = 5
    timeout_s: float = 600.0
    concurrency: int = 8
    name: str | None = None

    def build(self) -> Policy:
        from termagent.policy.openai_compat import OpenAIPolicy

        return OpenAIPolicy(**_fields(self))


@dataclass(frozen=True)
class ReplaySpec:
    """Completions read back from a file: termagent.policy.replay.ReplayPolicy."""

    path: Path
    name: str | None = None

    def build(self) -> Policy:
        from termagent.policy.replay import ReplayPolicy

        return ReplayPolicy(**_fields(self))


PolicySpec = HFSpec | OpenVINOSpec | OpenAISpec | ReplaySpec
KINDS: dict[str, type] = {"hf": HFSpec, "openvino": OpenVINOSpec, "openai": OpenAISpec, "replay": ReplaySpec}


def parse_spec(text: str) -> PolicySpec:
    """"openai:http://h:8000/v1,model=m" -> OpenAISpec(url="http://h:8000/v1", model="m")."""
    kind, sep, rest = text.partition(":")
    if not sep or not rest:
        raise PolicyError(f"policy spec {text!r}: expected KIND:TARGET, e.g. hf:models/base, "
                          "openai:http://127.0.0.1:8000/v1, replay:completions.jsonl")
    if kind not in KINDS:
        raise PolicyError(f"policy spec {text!r}: unknown kind {kind!r} ({', '.join(KINDS)})")
    target, *options = rest.split(",")
    opts: dict[str, str] = {}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq or not re.fullmatch(r"[a-z_]+", key.strip()):
            raise PolicyError(f"policy spec {text!r}: option {option!r} is not key=value")
        opts[key.strip()] = value.strip()
    cls = KINDS[kind]
    first = dataclasses.fields(cls)[0].name  # the target: model_dir, url or path
    return _typed(cls, {first: target, **opts}, where=f"policy spec {text!r}")


def make_policy(spec: str | PolicySpec, **overrides) -> Policy:
    """Build the policy a spec (or its string form) names; `overrides` replace the spec's fields."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    given = {k: v for k, v in overrides.items() if v is not None}
    if given:
        spec = dataclasses.replace(spec, **_typed(type(spec), given, where=f"policy {spec!r}", whole=False))
    return spec.build()


def engine_spec(engine, base: str | Path, adapter: str | Path | None = None, **fields) -> OpenVINOSpec:
    """The OpenVINOSpec of `base`'s IR (models/base -> models/base_openvino; + a saved adapter, fused) under an
    EngineConfig's settings (the `engine:` params section)."""
    from termagent.policy.openvino import ir_dir_for

    return OpenVINOSpec(ir_dir=ir_dir_for(base), tokenizer=Path(base), adapter=Path(adapter) if adapter else None,
                        precision=engine.precision, kv_cache_gb=engine.kv_cache_gb,
                        prefix_caching=engine.prefix_caching, adapter_mode=engine.adapter_mode, **fields)


def _fields(spec) -> dict:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


def _typed(cls: type, values: dict, *, where: str, whole: bool = True):
    """`values` converted to the types of `cls`'s fields: an instance of `cls` (whole=True) or a dict."""
    hints = typing.get_type_hints(cls)
    out = {}
    for key, value in values.items():
        if key not in hints:
            raise PolicyError(f"{where}: unknown option {key!r} (one of {', '.join(hints)})")
        out[key] = _convert(value, hints[key], where=f"{where}: {key}")
    return cls(**out) if whole else out


def _convert(value, hint, *, where: str):
    """One value to its field's type (int, float, bool, Path or str; `X | None` takes X)."""
    if isinstance(hint, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    if hint is bool and str(value).lower() in ("true", "false", "1", "0"):
        return str(value).lower() in ("true", "1")
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    try:
        if hint is Path:
            return Path(value)
        if hint in (int, float):
            return hint(value)
        if hint is str:
            return str(value)
    except (TypeError, ValueError):
        pass
    raise PolicyError(f"{where}: expected {hint.__name__}, got {value!r}")

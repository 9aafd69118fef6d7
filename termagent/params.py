"""The one reader of params.yaml: one typed, validated dataclass per section, for stages and CLIs.

    params = load_params("params.yaml", profile="h100")   # profiles/h100.yaml deep-merged over it
    cfg = section(params, "agent", AgentConfig)             # or, in a click command:
    s = read_sections("params.yaml", None, agent=AgentConfig, eval=EvalConfig)   # ClickException on error

The library never reads params.yaml: stages and CLI commands call this module and hand the typed
configs on. Errors name the file and the key, e.g. `params.yaml: sandbox.concurrency must be int, got
'eight'`.

One value per knob. The config dataclass next to the code holds every default, and params.yaml (the
embedded 2-core CPU profile) states the same values, each with the one comment that says why (DVC tracks
params.yaml); tests/test_params_defaults.py fails naming `section.key` on any difference. To add a section:
add its dataclass to `SECTIONS` ("name": "module:Class") and its values to params.yaml.

TRL's own knobs pass through: a `trl:` map of a training section (`sft.trl`, `dpo.trl`, `grpo.trl`, ...;
a field made with `trl_knobs`) goes straight into the TRL config, each key checked here against that
config's fields (`params.yaml: sft.trl.learnin_rate: not a field of trl.SFTConfig`). A knob termagent reads
itself (max_steps, max_length, batch sizes, temperature, ...) is a typed field of the section and may not
appear in the map too.

Profiles are layered when read: a profile file holds only the keys whose value it changes, and
`load_params(path, profile=...)` merges it over params.yaml (`make profile-h100` writes the same merge
into params.yaml). A partial profile is never read as a whole params file.

The whole file is checked whenever it is loaded (`load_params`, so every stage and CLI at start): every
top-level key is `seed` or a registered section, every section builds (known keys, typed values, nested
dataclasses), and every TRL knob is a field of its TRL config with a value of that field's type
(`params.yaml: sft.trl.adam_beta1 must be float, got 'fast'`). A typo in the `eval:` section therefore
stops `dvc repro` at its first stage, not when the evals start. Unknown names come with close matches.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ParamsError(ValueError):
    pass


# params.yaml section -> its config dataclass ("module:Class"), the one place a section is registered.
SECTIONS: dict[str, str] = {
    "sandbox": "termagent.sandbox.settings:SandboxParams",
    "generate": "termagent.tasks.families.instances:GenerateConfig",
    "tasks": "termagent.tasks.index:TasksConfig",
    "base_model": "termagent.models:BaseModelConfig",
    "serve": "termagent.serve:ServeConfig",
    "agent": "termagent.agent.config:AgentConfig",
    "engine": "termagent.policy.openvino:EngineConfig",
    "eval": "termagent.evaluate.config:EvalConfig",
    "report": "termagent.evaluate.config:ReportConfig",
    "judge": "termagent.judge:JudgeConfig",
    "datasets": "termagent.datasets.build:BuildConfig",
    "curate": "termagent.curate:CurateConfig",
    "demos": "termagent.train.demos:DemosConfig",
    "warmup": "termagent.train.warmup:WarmupParams",
    "sft": "termagent.train.sft:SFTParams",
    "dpo": "termagent.train.dpo:DPOParams",
    "sample": "termagent.train.sampling:SampleParams",
    "grpo": "termagent.train.grpo:GRPOParams",
    "mt_grpo": "termagent.train.mt_grpo:MTGRPOParams",
}

PROFILES_DIR = Path("profiles")


def section_class(name: str) -> type:
    """The dataclass registered for params section `name`."""
    import importlib

    if name not in SECTIONS:
        raise ParamsError(f"params section {name!r} is not registered in termagent.params.SECTIONS")
    module, attr = SECTIONS[name].split(":")
    return getattr(importlib.import_module(module), attr)


def close_matches(name: str, known: Any) -> str:
    """` (did you mean 'eval'?)` for a misspelt `name`, or nothing."""
    matches = difflib.get_close_matches(str(name), [str(k) for k in known], n=3)
    return f" (did you mean {' or '.join(repr(m) for m in matches)}?)" if matches else ""


def merge_profile(base: dict, override: dict, where: str = "") -> dict:
    """Deep-merge `override` (a profile) into `base` in place. A profile key that `base` lacks is an error
    (it would silently do nothing otherwise); `null` in the profile sets null."""
    for key, value in (override or {}).items():
        if key not in base:
            raise ParamsError(f"profile key {where}{key} does not exist in params.yaml{close_matches(key, base)}")
        if isinstance(value, dict) and isinstance(base[key], dict):
            merge_profile(base[key], value, f"{where}{key}.")
        else:
            base[key] = value
    return base


def profile_path(profile: str | Path) -> Path:
    """profiles/<name>.yaml for a name, or the path itself."""
    path = Path(profile)
    if path.suffix in (".yaml", ".yml"):
        return path
    path = PROFILES_DIR / f"{profile}.yaml"
    if not path.exists():
        available = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
        raise ParamsError(f"{path}: no such profile (available: {available})")
    return path


def load_params(path: str | Path = "params.yaml", profile: str | Path | None = None) -> dict[str, Any]:
    """params.yaml as a dict, with `profile` (a name under profiles/ or a path) merged over it, the whole
    result checked (`validate`)."""
    params = _read_yaml(Path(path))
    where = str(path)
    if profile:
        profile_file = profile_path(profile)
        try:
            merge_profile(params, _read_yaml(profile_file))
        except ParamsError as exc:
            raise ParamsError(f"{profile_file}: {exc}") from None
        where = f"{path}+{profile_file}"
    validate(params, where)
    return params


# Top-level keys of params.yaml that are not sections.
TOP_LEVEL: dict[str, type] = {"seed": int}


def validate(params: dict[str, Any], file: str = "params.yaml") -> None:
    """The whole params file checked at once: unknown top-level keys, and every section present built with its
    dataclass (unknown keys, types, TRL knobs). Every problem is reported, one per line."""
    known = [*TOP_LEVEL, *SECTIONS]
    errors = []
    for key, value in params.items():
        if key in TOP_LEVEL:
            try:
                _check(value, TOP_LEVEL[key], f"{file}: {key}")
            except ParamsError as exc:
                errors.append(str(exc))
        elif key not in SECTIONS:
            errors.append(f"{file}: {key}: unknown top-level key{close_matches(key, known)}; known: {known}")
    for name in SECTIONS:
        if name in params:
            try:
                section(params, name, section_class(name), file)
            except ParamsError as exc:
                errors.append(str(exc))
    if errors:  # a bad top-level seed is reported once, not once per seeded section
        raise ParamsError("\n".join(dict.fromkeys(errors)))


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ParamsError(f"{path}: not found (run from the repository root)") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of sections at the top level")
    return data


def _check(value: Any, tp: Any, where: str) -> Any:
    """Coerce/check one value against a dataclass field type (the few shapes params use)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check(value, arg, where)
            except ParamsError as exc:
                errors.append(str(exc))
        raise ParamsError(errors[0] if errors else f"{where}: unexpected value {value!r}")
    if origin is typing.Literal:
        if value not in typing.get_args(tp):
            raise ParamsError(f"{where} must be one of {list(typing.get_args(tp))}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ParamsError(f"{where} must be a list, got {value!r}")
        (item,) = typing.get_args(tp)[:1] or (Any,)
        return [_check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ParamsError(f"{where} must be a mapping, got {value!r}")
        _, vt = typing.get_args(tp) or (Any, Any)
        return {str(k): _check(v, vt, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise ParamsError(f"{where} must be {tp.__name__}, got {value!r}")
        return value
    return value


def build(cls: type[T], data: Any, where: str) -> T:
    """Build dataclass `cls` from a mapping; unknown keys and wrong types are errors."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParamsError(f"{where} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown:
        hints_text = "".join(close_matches(key, fields) for key in unknown)
        raise ParamsError(f"{where}: unknown key(s) {unknown}{hints_text}; known: {sorted(fields)}")
    kwargs = {name: _check(value, hints[name], f"{where}.{name}") for name, value in data.items()}
    for name, value in kwargs.items():
        if "trl_config" in fields[name].metadata:
            check_trl_knobs(value, fields[name].metadata, set(fields), f"{where}.{name}")
    missing = [
        n for n, f in fields.items()
        if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ParamsError(f"{where}: missing key(s) {missing}")
    try:
        return cls(**kwargs)
    except ParamsError:
        raise
    except ValueError as exc:  # the config's own checks (__post_init__) get the file and section named
        raise ParamsError(f"{where}: {exc}") from exc


def trl_knobs(config: str, reserved: tuple[str, ...] = ()) -> dict[str, Any]:
    """The metadata of a dataclass field holding TRL's own knobs of `trl.<config>` (`sft.trl: {learning_rate:
    ...}`): passed straight into that config, each key checked at load against its fields. A knob termagent reads
    itself is a typed field of the section instead, and `reserved` names what the code sets (neither may appear
    in the map)."""
    return {"trl_config": config, "reserved": tuple(reserved)}


def check_trl_knobs(knobs: dict[str, Any], metadata: Any, typed: set[str], where: str) -> None:
    """`params.yaml: sft.trl.learnin_rate: not a field of trl.SFTConfig (did you mean 'learning_rate'?)`, one set
    elsewhere, or a value not of the field's type (`sft.trl.adam_beta1 must be float, got 'fast'`; the field types
    are TRL's own annotations, so an enum-typed knob takes its string values)."""
    import trl

    config = metadata["trl_config"]
    cls = getattr(trl, config)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key, value in knobs.items():
        if key not in names:
            raise ParamsError(f"{where}.{key}: not a field of trl.{config}{close_matches(key, names)}")
        if key in typed or key in metadata["reserved"]:
            raise ParamsError(f"{where}.{key}: set by termagent (a typed key of the section, or fixed in the code)")
        _check(value, hints[key], f"{where}.{key}")


# Sections whose `seed` is the run's: the top-level `seed` key of params.yaml, unless the section sets its own.
# One key makes a seeded variant one DVC experiment: `dvc exp run -S seed=1`.
RUN_SEEDED = ("sample", "warmup", "grpo", "sft", "dpo", "curate", "mt_grpo")


def section(params: dict[str, Any], name: str, cls: type[T], file: str = "params.yaml") -> T:
    data = params.get(name)
    if name in RUN_SEEDED and "seed" in params and isinstance(data, dict) and "seed" not in data:
        if not isinstance(params["seed"], int) or isinstance(params["seed"], bool):
            raise ParamsError(f"{file}: seed must be int, got {params['seed']!r}")
        data = {**data, "seed": params["seed"]}
    return build(cls, data, f"{file}: {name}")


def read_sections(params_file: str | Path = "params.yaml", profile: str | Path | None = None, *,
                  missing_ok: bool = False, **sections: type) -> SimpleNamespace:
    """For a click command: the named sections, typed (`read_sections(f, None, agent=AgentConfig).agent`).
    Any error becomes a click.ClickException naming file and key. `missing_ok`: a command run outside the
    repository (no params file) gets the dataclass defaults."""
    import click

    where = f"{params_file}+{profile}" if profile else str(params_file)
    try:
        if missing_ok and not Path(params_file).is_file() and not profile:
            params: dict[str, Any] = {}
        else:
            params = load_params(params_file, profile)
        return SimpleNamespace(**{name: section(params, name, cls, file=where) for name, cls in sections.items()})
    except ParamsError as e:
        raise click.ClickException(str(e)) from e


def profile_option(func):
    """The `--params FILE` and `--profile NAME` options every stage and params-reading command takes."""
    import click

    func = click.option("--profile", default=None,
                        help="A profile merged over --params (profiles/NAME.yaml holds only the keys it changes).")(func)
    return click.option("--params", "params_file", default="params.yaml", show_default=True,
                        type=click.Path(path_type=Path), help="The params file (DVC tracks it).")(func)

"""One default, once: params.yaml restates the config dataclasses, and profiles layer over it.

For every section params.yaml has, the dataclass registered in `termagent.params.SECTIONS` is built
from params.yaml and compared, key by key (nested sections too), with the dataclass's own defaults; any
difference that is not declared in `termagent.embedded_overrides.EMBEDDED_OVERRIDES` fails, naming `section.key`.
Adding a section (generate, demos, sft, grpo, dpo, mt_grpo, ...): register its dataclass in
`termagent.params.SECTIONS`; declare in `EMBEDDED_OVERRIDES` (with the reason) each value params.yaml
sets on purpose away from the dataclass default. Nothing to change here.

    python -m pytest tests/test_params_defaults.py -q
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from termagent.embedded_overrides import EMBEDDED_OVERRIDES
from termagent.params import (
    SECTIONS,
    ParamsError,
    load_params,
    merge_profile,
    section,
    section_class,
)

REPO = Path(__file__).resolve().parents[1]
PARAMS = load_params(REPO / "params.yaml")


def flat(value, prefix: str) -> dict[str, object]:
    """`section.key` -> value, through nested dataclasses (a mapping-valued field is one value)."""
    if not dataclasses.is_dataclass(value):
        return {prefix: value}
    out: dict[str, object] = {}
    for f in dataclasses.fields(value):
        out.update(flat(getattr(value, f.name), f"{prefix}.{f.name}"))
    return out


def differences(name: str, params: dict) -> dict[str, tuple[object, object]]:
    cls = section_class(name)
    from_yaml, default = flat(section(params, name, cls), name), flat(cls(), name)
    return {k: (from_yaml.get(k), default.get(k)) for k in sorted(set(from_yaml) | set(default))
            if from_yaml.get(k) != default.get(k)}


def test_every_params_section_is_registered():
    assert sorted(set(PARAMS) - set(SECTIONS)) == [], "register each params.yaml section in termagent.params.SECTIONS"


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_params_yaml_restates_the_dataclass_defaults(name):
    undeclared = {k: v for k, v in differences(name, PARAMS).items() if k not in EMBEDDED_OVERRIDES}
    assert not undeclared, "params.yaml differs from the dataclass default (params.yaml, default): " + ", ".join(
        f"{k}: {a!r} vs {b!r}" for k, (a, b) in undeclared.items()) + \
        " -- fix one of them, or declare the key in termagent.embedded_overrides.EMBEDDED_OVERRIDES"


def test_every_declared_override_is_a_real_difference():
    real = {k for name in PARAMS for k in differences(name, PARAMS)}
    assert sorted(set(EMBEDDED_OVERRIDES) - real) == [], "stale EMBEDDED_OVERRIDES entries: params.yaml equals the default"
    assert all(why.strip() for why in EMBEDDED_OVERRIDES.values())


def test_the_drift_test_catches_a_drifted_value():
    drifted = yaml.safe_load((REPO / "params.yaml").read_text())
    drifted["tasks"]["split_seed"] = 7
    assert differences("tasks", drifted) == {"tasks.split_seed": (7, 0)}


# -- profiles -----------------------------------------------------------------------------------------


def leaves(tree: dict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in tree.items():
        keys |= leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}"}
    return keys


@pytest.mark.parametrize("profile", sorted(p.stem for p in (REPO / "profiles").glob("*.yaml")))
def test_a_profile_changes_exactly_the_keys_it_names(profile, monkeypatch):
    monkeypatch.chdir(REPO)
    named = leaves(yaml.safe_load((REPO / "profiles" / f"{profile}.yaml").read_text()))
    merged = load_params("params.yaml", profile=profile)
    base_leaves, merged_leaves = _values(PARAMS), _values(merged)
    assert set(base_leaves) == set(merged_leaves)
    changed = {k for k in base_leaves if base_leaves[k] != merged_leaves[k]}
    assert changed <= named
    # A named key that keeps its value is fine (the profile restates it); every other key is untouched.
    assert all(merged_leaves[k] == base_leaves[k] for k in set(base_leaves) - named)
    for key in named:
        assert merged_leaves[key] == _get(yaml.safe_load((REPO / "profiles" / f"{profile}.yaml").read_text()), key)
    # Every section still builds (the merge typed-checks).
    for name in merged:
        section(merged, name, section_class(name), file=f"params.yaml+{profile}")


def test_h100_profile_is_layered_not_read_whole(monkeypatch):
    monkeypatch.chdir(REPO)
    merged = load_params("params.yaml", profile="h100")
    assert merged["tasks"] == PARAMS["tasks"]  # a section the profile omits keeps params.yaml's values
    assert merged["agent"]["max_turns"] == 50 and merged["agent"]["pane_width"] == PARAMS["agent"]["pane_width"]
    assert merged["sandbox"]["image_aliases"] == PARAMS["sandbox"]["image_aliases"]


def test_a_profile_key_params_yaml_lacks_is_an_error():
    with pytest.raises(ParamsError, match="profile key agent.max_turnz does not exist"):
        merge_profile({"agent": {"max_turns": 8}}, {"agent": {"max_turnz": 9}})


def _values(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_values(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _get(tree: dict, dotted: str):
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def test_make_profile_writes_the_same_merge_the_reader_applies(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.chdir(REPO)
    copy = tmp_path / "params.yaml"
    copy.write_text((REPO / "params.yaml").read_text())
    subprocess.run([sys.executable, "scripts/apply_profile.py", "h100", "--params", str(copy)], check=True,
                   capture_output=True)
    assert load_params(copy) == load_params("params.yaml", profile="h100")

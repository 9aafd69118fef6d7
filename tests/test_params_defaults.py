"""One value per knob: the config dataclasses' defaults are params.yaml's values, and a profile is a diff.

- For every section of params.yaml, the dataclass registered in `termagent.params.SECTIONS` built from
  params.yaml equals the dataclass's own defaults, key by key (nested sections too): a test lists every key
  whose value differs, and finds none. Changing a value means changing both (the test names the key).
- A profile (profiles/*.yaml) holds only keys whose value differs from the default, and the merged
  configurations it yields are the ones in tests/fixtures/params/merged_profiles.json (a changed value is a
  changed fixture: `python tests/test_params_defaults.py --write`).
- A `trl:` map passes TRL's own knobs through; a misspelt key fails at load, naming the file and the key.

    python -m pytest tests/test_params_defaults.py -q
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import yaml

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
SNAPSHOT = REPO / "tests/fixtures/params/merged_profiles.json"
PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))


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
    assert sorted(set(PARAMS) - set(SECTIONS) - {"seed"}) == [], \
        "register each params.yaml section in termagent.params.SECTIONS"


def test_no_key_differs_between_a_dataclass_default_and_params_yaml():
    differ = {k: v for name in sorted(set(PARAMS) - {"seed"}) for k, v in differences(name, PARAMS).items()}
    assert differ == {}, "params.yaml differs from the dataclass default (params.yaml, default): " + ", ".join(
        f"{k}: {a!r} vs {b!r}" for k, (a, b) in differ.items())


def test_the_drift_test_catches_a_drifted_value():
    drifted = yaml.safe_load((REPO / "params.yaml").read_text())
    drifted["tasks"]["split_seed"] = 7
    assert differences("tasks", drifted) == {"tasks.split_seed": (7, 0)}


def test_a_misspelt_trl_knob_fails_naming_file_and_key():
    bad = yaml.safe_load((REPO / "params.yaml").read_text())
    bad["sft"]["trl"]["learnin_rate"] = 1e-4
    with pytest.raises(ParamsError, match=r"^params.yaml: sft.trl.learnin_rate: not a field of trl.SFTConfig \(did you mean .learning_rate.\?\)$"):
        section(bad, "sft", section_class("sft"))


def test_a_knob_termagent_reads_cannot_hide_in_the_trl_map():
    bad = yaml.safe_load((REPO / "params.yaml").read_text())
    bad["dpo"]["trl"]["max_length"] = 9  # dpo.max_length: one place per knob
    with pytest.raises(ParamsError, match="params.yaml: dpo.trl.max_length: set by termagent"):
        section(bad, "dpo", section_class("dpo"))


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
    for name in set(merged) - {"seed"}:
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


# -- profiles are diffs -------------------------------------------------------------------------------


def merged_configs() -> dict[str, dict[str, object]]:
    """params.yaml, and params.yaml + each profile, built through the dataclasses: `section.key` -> value,
    a `trl:` map key by key."""
    out = {}
    for profile in [None, *PROFILES]:
        params = load_params(REPO / "params.yaml", REPO / "profiles" / f"{profile}.yaml" if profile else None)
        values: dict[str, object] = {}
        for name in sorted(set(params) - {"seed"}):
            for key, value in flat(section(params, name, section_class(name)), name).items():
                if key.endswith(".trl"):
                    values.update({f"{key}.{k}": v for k, v in value.items()})
                else:
                    values[key] = value
        out[profile or "params"] = dict(sorted(values.items()))
    return json.loads(json.dumps(out, default=list))


@pytest.mark.parametrize("profile", PROFILES)
def test_a_profile_holds_no_key_equal_to_the_default(profile):
    named = _values(yaml.safe_load((REPO / "profiles" / f"{profile}.yaml").read_text()))
    same = sorted(k for k, v in named.items() if _values(PARAMS).get(k) == v)
    assert same == [], f"profiles/{profile}.yaml restates the default of {same}"


def test_the_profiles_yield_the_recorded_configurations():
    recorded, now = json.loads(SNAPSHOT.read_text()), merged_configs()
    assert sorted(now) == sorted(recorded)
    for name in now:
        changed = {k: (recorded[name].get(k), now[name].get(k)) for k in set(recorded[name]) | set(now[name])
                   if recorded[name].get(k) != now[name].get(k)}
        assert changed == {}, f"{name}: (recorded, now) {changed}; rerun with --write if that is meant"


def test_a_second_seed_is_one_key():
    """`dvc exp run -S seed=1`: every run-seeded section takes the top-level seed; the tasks stay the same."""
    from termagent.params import RUN_SEEDED

    seeded = {**PARAMS, "seed": 1}
    for name in RUN_SEEDED:
        assert section(seeded, name, section_class(name)).seed == 1, name
    for name in ("generate", "tasks", "base_model", "report"):
        assert section(seeded, name, section_class(name)) == section(PARAMS, name, section_class(name))


@pytest.mark.parametrize("profile", [None, *PROFILES])
def test_grpo_round_2_is_one_key_on_every_profile(profile):
    """`dvc exp run -S grpo.round=2` (docs/dvc.md): round 2's batch must hold whole groups of 16 on every profile,
    whatever micro-batch round 1 trains with (micro-batch 2 broke it on the embedded default until round2's
    accumulation followed)."""
    params = load_params(REPO / "params.yaml", REPO / "profiles" / f"{profile}.yaml" if profile else None)
    params["grpo"] = {**params["grpo"], "round": 2}
    round2 = section(params, "grpo", section_class("grpo")).effective()
    assert round2.generation_batch_size % round2.num_generations == 0 and round2.num_generations == 16


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    SNAPSHOT.write_text(json.dumps(merged_configs(), indent=1) + "\n")

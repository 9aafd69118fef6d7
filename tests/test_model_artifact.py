"""termagent.models.artifact: what a models/<name> directory is (weights, start record, pass-through), and the
typed policy spec the eval builds from it (termagent.policy.spec), with no string round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from termagent.models.artifact import (
    ModelArtifact,
    model_dirs,
    passed_through,
    resolve_base,
    resolve_start,
    resolve_start_model,
    untrained_start,
    write_start,
)
from termagent.policy import HFSpec, OpenAISpec, PolicyError, ReplaySpec, make_policy, parse_spec


def models(tmp_path: Path) -> Path:
    """base (a full model), sft (an adapter naming a base gone to the Hub), merged (a full model), warmup_off
    (start.json only), dpo (the sft adapter passed through), own (an adapter naming its own local base)."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text("{}")
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "gone/on/hub"}))
    (tmp_path / "sft" / "manifest.json").write_text(json.dumps({"stage": "sft", "init_adapter": "models/warmup"}))
    (tmp_path / "merged").mkdir()
    (tmp_path / "merged" / "config.json").write_text("{}")
    write_start(tmp_path / "warmup_off", base_dir=tmp_path / "base", adapter=False)
    (tmp_path / "dpo").mkdir()
    (tmp_path / "dpo" / "adapter_config.json").write_text("{}")
    (tmp_path / "dpo" / "manifest.json").write_text(json.dumps({"stage": "dpo", "skipped": "empty input",
                                                                "init_adapter": "models/sft"}))
    (tmp_path / "other_base").mkdir()
    (tmp_path / "other_base" / "config.json").write_text("{}")
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": str(tmp_path / "other_base")}))
    return tmp_path


def test_weights_of_base_adapter_full_model_and_a_local_base(tmp_path):
    root = models(tmp_path)
    assert model_dirs("base", root) == (root / "base", None)
    assert model_dirs("sft", root) == (root / "base", root / "sft")  # a Hub name: models/base stands for it
    assert model_dirs("merged", root) == (root / "merged", None)
    assert model_dirs("own", root) == (root / "other_base", root / "own")
    missing = ModelArtifact.open("missing", root)  # records only: nothing to evaluate is not the question yet
    assert missing.not_evaluated() is None
    with pytest.raises(FileNotFoundError, match="neither a model"):
        _ = missing.base
    (root / "base" / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="dvc repro base_model"):
        model_dirs("base", root)


def test_an_untrained_start_is_the_base_and_is_not_evaluated(tmp_path):
    root = models(tmp_path)
    art = ModelArtifact.open("warmup_off", root)
    assert (art.base, art.adapter) == (root / "base", None)
    assert art.untrained_start == untrained_start("warmup_off", root) == {
        "start_from": "base", "base": str(root / "base"), "adapter": None, "metrics": None}
    reason, record = art.not_evaluated()
    assert record is art.untrained_start
    assert reason == (f"models/warmup_off trained no model of its own (start.json: start from {root / 'base'}), "
                      "so there is nothing to evaluate: that model is eval@base's")
    # a start.json beside weights is a trained model: evaluated
    write_start(root / "sft", base_dir=root / "base", adapter=True)
    assert untrained_start("sft", root) is None and ModelArtifact.open("sft", root).not_evaluated() is None
    assert untrained_start("base", root) is None


def test_a_passed_through_adapter_names_whose_eval_it_is(tmp_path):
    root = models(tmp_path)
    art = ModelArtifact.open("dpo", root)
    assert (art.base, art.adapter) == (root / "base", root / "dpo")
    assert art.passed_through == passed_through("dpo", root) and art.passed_through["init_adapter"] == "models/sft"
    reason, record = art.not_evaluated()
    assert record["skipped"] == "empty input"
    assert reason == ("models/dpo trained nothing of its own (empty input): it is the adapter of models/sft "
                      "unchanged, which eval@sft evaluates")
    # a manifest with init_adapter but no "skipped" is a trained adapter
    assert passed_through("sft", root) is None and ModelArtifact.open("sft", root).not_evaluated() is None
    (root / "dpo" / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json: not valid JSON"):
        ModelArtifact.open("dpo", root)


def test_start_json_is_written_and_resolved_byte_for_byte(tmp_path):
    (tmp_path / "warmup").mkdir()
    (tmp_path / "warmup" / "stale_adapter.bin").write_text("x")
    record = write_start(tmp_path / "warmup", base_dir="models/base", adapter=False)
    # the format training stages write and dvc.lock hashes: these keys, in this order
    assert list(json.loads((tmp_path / "warmup" / "start.json").read_text())) == ["start_from", "base", "adapter",
                                                                                  "metrics"]
    assert record == {"start_from": "base", "base": "models/base", "adapter": None, "metrics": None}
    assert [p.name for p in (tmp_path / "warmup").iterdir()] == ["start.json"]  # starting from base: replaced whole
    assert resolve_start(tmp_path / "warmup") == (Path("models/base"), None)
    assert resolve_start_model(tmp_path / "warmup") == (Path("models/base"), None)
    assert resolve_start_model(tmp_path / "plain") == (tmp_path / "plain", None)  # a model directory itself
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    write_start(adapter, base_dir="models/base", adapter=True, metrics={"last_loss": 1.5})
    assert resolve_start_model(adapter) == (Path("models/base"), adapter) and resolve_base(adapter) == Path("models/base")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "start.json").write_text('{"start_from": "merged", "base": "b"}')
    with pytest.raises(ValueError, match="start_from must be 'adapter' or 'base', got 'merged'"):
        resolve_start(tmp_path / "bad")
    with pytest.raises(FileNotFoundError, match="dvc repro warmup"):
        resolve_start(tmp_path / "nowhere")


def test_policy_specs_are_typed_and_the_string_form_parses_once(tmp_path):
    spec = parse_spec(f"hf:{tmp_path},adapter={tmp_path / 'a'},prefix_cache=16,context_limit=512")
    assert spec == HFSpec(model_dir=tmp_path, adapter=tmp_path / "a", prefix_cache=16, context_limit=512)
    assert isinstance(spec.prefix_cache, int) and isinstance(spec.model_dir, Path)
    assert parse_spec("openai:http://h:8000/v1,model=m,timeout_s=5") == OpenAISpec(url="http://h:8000/v1",
                                                                                    model="m", timeout_s=5.0)
    assert parse_spec("replay:c.jsonl") == ReplaySpec(path=Path("c.jsonl"))
    with pytest.raises(PolicyError, match="prefix_cache: expected int, got 'many'"):
        parse_spec(f"hf:{tmp_path},prefix_cache=many")
    with pytest.raises(PolicyError, match="unknown option 'adaptor'"):
        parse_spec(f"hf:{tmp_path},adaptor=x")
    with pytest.raises(PolicyError, match="unknown kind 'gguf'"):
        parse_spec("gguf:model.bin")
    with pytest.raises(PolicyError, match="is not key=value"):
        parse_spec(f"hf:{tmp_path},adapter")
    # make_policy builds from the dataclass itself; overrides are converted to the field's type
    with pytest.raises(PolicyError, match="has no config.json"):
        make_policy(HFSpec(model_dir=tmp_path), context_limit="64")
    with pytest.raises(PolicyError, match="context_limit: expected int"):
        make_policy(HFSpec(model_dir=tmp_path), context_limit="lots")

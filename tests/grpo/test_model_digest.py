"""GRPO's resume fingerprint digests the start model without reading its weight shards whole
(termagent/train/grpo.py model_digest): an 8B snapshot is 16 GB, the digest reads a few MiB of it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from termagent.train.grpo import SAMPLE_BYTES, WHOLE_FILE_MAX, model_digest


def old_digest(path: Path) -> str:
    """What the stage computed before: every file read whole."""
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(file.relative_to(path)).encode())
        h.update(file.read_bytes())
    return h.hexdigest()


def hub_snapshot(root: Path, *, shard: bytes, revision: str = "a" * 40) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps({"source": "hf", "hf_id": "org/model", "revision": revision}))
    (root / "config.json").write_text('{"hidden_size": 4096}')
    (root / "model-00001-of-00001.safetensors").write_bytes(shard)
    return root


def test_a_small_model_digests_as_it_always_did(tiny_model_dir):
    # the CPU run's tiny model: every file under the whole-file limit, so its resume fingerprint is unchanged
    assert all(p.stat().st_size <= WHOLE_FILE_MAX for p in tiny_model_dir.rglob("*") if p.is_file())
    assert model_digest(tiny_model_dir) == old_digest(tiny_model_dir)
    assert model_digest(None) is None


def test_a_large_shard_is_sampled_and_the_manifest_decides(tmp_path):
    limit = 1024  # files over 1 KiB count as shards here (64 MiB in the stage)
    shard = bytes(range(256)) * (3 * SAMPLE_BYTES // 256)  # 3 MiB: head, middle and tail MiB
    base = model_digest(hub_snapshot(tmp_path / "a", shard=shard), whole_file_max=limit)
    again = model_digest(hub_snapshot(tmp_path / "b", shard=shard), whole_file_max=limit)
    assert base == again  # the same snapshot in another directory

    middle = bytearray(shard)
    middle[len(shard) // 2] ^= 0xFF  # a byte the digest never reads: proof the shard is not hashed whole
    assert model_digest(hub_snapshot(tmp_path / "c", shard=bytes(middle)), whole_file_max=limit) == base
    # under the stage's 64 MiB limit the same 3 MiB file is hashed whole, and the byte shows
    assert model_digest(tmp_path / "c") != model_digest(tmp_path / "a")

    changed = {
        "revision": hub_snapshot(tmp_path / "d", shard=shard, revision="b" * 40),  # manifest.json: another commit
        "head": hub_snapshot(tmp_path / "e", shard=bytes([shard[0] ^ 0xFF]) + shard[1:]),
        "tail": hub_snapshot(tmp_path / "f", shard=shard[:-1] + bytes([shard[-1] ^ 0xFF])),
        "size": hub_snapshot(tmp_path / "g", shard=shard + b"\x00"),
    }
    for what, path in changed.items():
        assert model_digest(path, whole_file_max=limit) != base, what
    (tmp_path / "h").mkdir()
    renamed = hub_snapshot(tmp_path / "h", shard=shard)
    (renamed / "model-00001-of-00001.safetensors").rename(renamed / "model.safetensors")
    assert model_digest(renamed, whole_file_max=limit) != base

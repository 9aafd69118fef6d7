"""Harbor's task layout, schema 1.4 (mirrors harbor.models.task.config.TaskConfig of harbor 0.25):

    task.toml          version/schema_version, [task] name, [metadata], [agent], [verifier], [environment]
    instruction.md     the prompt (leading "canary" comment lines are stripped, as Harbor does)
    environment/       Dockerfile (+ build context), unless [environment].docker_image names an image
    tests/test.sh      run as `bash /tests/test.sh`; writes /logs/verifier/reward.json or reward.txt
    solution/solve.sh  the oracle (optional)

Defaults are Harbor's except where Harbor has none and a sandbox needs one: an unset
[agent].timeout_sec means "no limit" in Harbor, here 600 s; unset cpus / memory_mb mean "the
provider's default" in Harbor, here 1 CPU and 512 MB (the sandbox limits of
docs/design.md#the-gpu-configuration).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from termagent.tasks.fields import FieldReader, show
from termagent.tasks.model import EnvironmentSpec

CONFIG_FILE = "task.toml"
TEST_COMMAND = "bash /tests/test.sh"

DEFAULT_AGENT_TIMEOUT_SEC = 600.0
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0  # Harbor's VerifierConfig default
DEFAULT_BUILD_TIMEOUT_SEC = 600.0  # Harbor's EnvironmentConfig default
DEFAULT_CPUS = 1.0
DEFAULT_MEMORY_MB = 512
NETWORK_MODES = ("public", "no-network")  # Harbor's "allowlist" needs a proxy we do not have

# Harbor's PackageInfo name pattern: "org/name".
_PACKAGE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
_BARE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")
_CANARY_LINE = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)

# Keys Harbor knows. Those we do not act on are accepted; the ones that change what a trial
# means are refused (multi-step tasks, a separate verifier container, Windows images).
_TOP_KEYS = {"version", "schema_version", "task", "metadata", "verifier", "agent", "environment",
             "solution", "source", "multi_step_reward_strategy", "steps", "artifacts"}
_TASK_KEYS = {"name", "version", "description", "authors", "keywords"}
_AGENT_KEYS = {"timeout_sec", "user", "network_mode", "allowed_hosts"}
_VERIFIER_KEYS = {"timeout_sec", "env", "user", "environment_mode", "environment", "collect",
                  "network_mode", "allowed_hosts"}
_ENVIRONMENT_KEYS = {"build_timeout_sec", "docker_image", "os", "cpus", "memory_mb", "storage_mb", "gpus",
                     "gpu_types", "tpu", "mcp_servers", "env", "skills_dir", "healthcheck", "workdir",
                     "allow_internet", "network_mode", "allowed_hosts", "memory", "storage"}


def strip_canary(text: str) -> str:
    """Drop leading canary comment lines and the blank lines after them (Harbor's strip_canary)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY_LINE.match(lines[i].strip()):
        i += 1
    while i < len(lines) and lines[i].strip() == "":
        i += 1
    return "\n".join(lines[i:])


def parse_size_mb(text: str) -> int:
    """Harbor's legacy size strings: "2G" -> 2048, "512M" -> 512, "2048K" -> 2."""
    s = text.strip().upper()
    units = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}
    if not s or s[-1] not in units:
        raise ValueError(f"expected a size like \"1G\" or \"512M\", got {show(text)}")
    return int(float(s[:-1]) * units[s[-1]])


def read_harbor(task_dir: Path) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """Parse a Harbor task directory into keyword arguments of `Task` (all but path, layout,
    content_hash). Returns (fields or None, problems, warnings); every problem names file and field."""
    toml = FieldReader(CONFIG_FILE)

    config: dict = {}
    try:
        config = tomllib.loads((task_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        toml.problem(f"invalid TOML: {e}")  # the message ends with "(at line L, column C)"
    except (OSError, UnicodeDecodeError) as e:
        toml.problem(f"unreadable: {e}")

    fields = _read_config(config, toml)
    problems, warnings = list(toml.problems), list(toml.warnings)

    instruction_path = task_dir / "instruction.md"
    instruction = ""
    if not instruction_path.is_file():
        problems.append("instruction.md: missing")
    else:
        instruction = strip_canary(instruction_path.read_text(encoding="utf-8", errors="replace"))
        if not instruction.strip():
            problems.append("instruction.md: empty")

    tests_dir = task_dir / "tests"
    if not (tests_dir / "test.sh").is_file():
        problems.append("tests/test.sh: missing")

    env_dir = task_dir / "environment"
    dockerfile = env_dir / "Dockerfile"
    env = fields.pop("environment")
    if not dockerfile.is_file() and not env["docker_image"]:
        hint = " (environment/docker-compose.yaml is not supported)" if (env_dir / "docker-compose.yaml").exists() else ""
        problems.append(f"environment/: neither environment/Dockerfile nor [environment].docker_image{hint}")

    solution_dir = task_dir / "solution"
    if not (solution_dir / "solve.sh").is_file():
        warnings.append("solution/solve.sh: missing (no oracle for this task)")

    if problems:
        return None, problems, warnings
    fields.update(
        instruction=instruction,
        environment=EnvironmentSpec(
            dockerfile=dockerfile if dockerfile.is_file() else None,
            context_dir=env_dir if env_dir.is_dir() else None,
            **env,
        ),
        tests_dir=tests_dir,
        test_command=TEST_COMMAND,
        solution=solution_dir if (solution_dir / "solve.sh").is_file() else None,
        reward_mode="reward_file",
    )
    if "id" not in fields:
        fields["id"] = task_dir.name
    return fields, problems, warnings


def _read_config(config: dict, r: FieldReader) -> dict[str, Any]:
    """Typed view of task.toml; problems and warnings go to `r`."""
    r.unknown_keys(config, _TOP_KEYS, "")
    out: dict[str, Any] = {}
    for key in ("version", "schema_version"):
        r.string(config, key, key)
    if config.get("steps"):
        r.problem("[[steps]]: multi-step tasks are not supported")

    task = r.table(config, "task", "[task]")
    r.unknown_keys(task, _TASK_KEYS, "[task]")
    name = r.string(task, "name", "[task].name")
    if name is not None:
        if _PACKAGE_NAME.match(name) and ".." not in name:
            out["id"] = name
        elif _BARE_NAME.match(name) and ".." not in name:
            # Accepted as the id, but Harbor itself would refuse it: say so.
            out["id"] = name
            r.warn(f"[task].name {show(name)} is not in Harbor's \"org/name\" form (Harbor 0.25 rejects it; "
                   "drop [task] to use the directory name, or write \"org/name\")")
        else:
            r.problem(f"[task].name must look like \"org/name\" (letters, digits, . _ -), got {show(name)}")

    metadata = dict(r.table(config, "metadata", "[metadata]"))
    for key in ("difficulty", "category"):
        if key in metadata:
            r.string(metadata, key, f"[metadata].{key}")
    if "tags" in metadata:
        metadata["tags"] = r.string_list(metadata, "tags", "[metadata].tags")
    if task.get("description") and "description" not in metadata:
        metadata["description"] = task["description"]
    out["metadata"] = metadata

    agent = r.table(config, "agent", "[agent]")
    r.unknown_keys(agent, _AGENT_KEYS, "[agent]")
    out["agent_timeout_sec"] = r.positive_number(agent, "timeout_sec", "[agent].timeout_sec",
                                                 DEFAULT_AGENT_TIMEOUT_SEC)
    _warn_ignored(agent, r, "[agent]", ("user", "network_mode", "allowed_hosts"))

    verifier = r.table(config, "verifier", "[verifier]")
    r.unknown_keys(verifier, _VERIFIER_KEYS, "[verifier]")
    out["verifier_timeout_sec"] = r.positive_number(verifier, "timeout_sec", "[verifier].timeout_sec",
                                                    DEFAULT_VERIFIER_TIMEOUT_SEC)
    out["verifier_env"] = r.string_map(verifier, "env", "[verifier].env")
    if verifier.get("environment") is not None or verifier.get("environment_mode") == "separate":
        r.problem("[verifier].environment / environment_mode = \"separate\": a separate verifier "
                  "container is not supported")
    _warn_ignored(verifier, r, "[verifier]", ("user", "network_mode", "allowed_hosts", "collect"))

    out["environment"] = _read_environment(r.table(config, "environment", "[environment]"), r)
    solution = r.table(config, "solution", "[solution]")
    if solution.get("env"):
        r.warn("[solution].env ignored")
    return out


def _read_environment(env: dict, r: FieldReader) -> dict[str, Any]:
    label = "[environment]"
    r.unknown_keys(env, _ENVIRONMENT_KEYS, label)
    memory_mb = r.positive_int(env, "memory_mb", f"{label}.memory_mb", None)
    storage_mb = r.positive_int(env, "storage_mb", f"{label}.storage_mb", None)
    # Harbor's deprecated size strings; a value that disagrees with the *_mb field is an error there too.
    for legacy, current, value_mb in (("memory", "memory_mb", memory_mb), ("storage", "storage_mb", storage_mb)):
        text = r.string(env, legacy, f"{label}.{legacy}")
        if text is None:
            continue
        try:
            parsed = parse_size_mb(text)
        except ValueError as e:
            r.problem(f"{label}.{legacy}: {e}")
            continue
        if value_mb is not None and value_mb != parsed:
            r.problem(f"{label}.{legacy} = {show(text)} ({parsed} MB) conflicts with {label}.{current} = {value_mb}")
        elif legacy == "memory":
            memory_mb = parsed
        else:
            storage_mb = parsed

    network_mode = r.string(env, "network_mode", f"{label}.network_mode")
    if network_mode is not None and network_mode not in NETWORK_MODES:
        r.problem(f"{label}.network_mode must be one of {', '.join(map(show, NETWORK_MODES))}, got {show(network_mode)}")
        network_mode = None
    allow_internet = r.boolean(env, "allow_internet", f"{label}.allow_internet")
    if network_mode is None and allow_internet is not None:
        network_mode = "public" if allow_internet else "no-network"  # Harbor's legacy mapping
    network = (network_mode or "public") == "public"  # Harbor's default is "public"

    workdir = r.string(env, "workdir", f"{label}.workdir")
    if workdir is not None and not workdir.startswith("/"):
        r.problem(f"{label}.workdir must be an absolute path, got {show(workdir)}")
        workdir = None
    os_name = r.string(env, "os", f"{label}.os")
    if os_name is not None and os_name.lower() != "linux":
        r.problem(f"{label}.os must be \"linux\", got {show(os_name)}")
    if env.get("gpus"):
        r.warn(f"{label}.gpus ignored: containers get no GPU")
    _warn_ignored(env, r, label, ("healthcheck", "mcp_servers", "skills_dir", "tpu", "gpu_types"))

    return {
        "docker_image": r.string(env, "docker_image", f"{label}.docker_image"),
        "build_timeout_sec": r.positive_number(env, "build_timeout_sec", f"{label}.build_timeout_sec",
                                            DEFAULT_BUILD_TIMEOUT_SEC),
        "cpus": r.positive_number(env, "cpus", f"{label}.cpus", DEFAULT_CPUS),
        "memory_mb": memory_mb if memory_mb is not None else DEFAULT_MEMORY_MB,
        "storage_mb": storage_mb,
        "network": network,
        "env": r.string_map(env, "env", f"{label}.env"),
        "workdir": workdir,
    }


def _warn_ignored(table: dict, r: FieldReader, label: str, keys: tuple[str, ...]) -> None:
    for key in keys:
        if table.get(key):
            r.warn(f"{label}.{key} is not supported and ignored")

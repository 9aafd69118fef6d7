"""relaunch_distributed(): the multi-GPU re-exec under `accelerate launch` (configured; no GPU here).

The argv is built by a pure function (tested on every branch); the exec path runs once for real with a CPU
accelerate config: the script is relaunched exactly once (a launcher that sets no LOCAL_RANK must not
make it relaunch forever) and keeps its arguments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from termagent.train.common import (
    DEFAULT_ACCELERATE_CONFIG,
    RELAUNCHED_ENV,
    is_main_process,
    relaunch_command,
    save_adapter,
    write_stage_metrics,
)

REPO = Path(__file__).resolve().parents[2]
ARGV = ["stages/grpo.py", "--profile", "h100", "--out", "models/grpo"]


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)  # the default config path is relative to the repository root, like dvc.yaml's cmds


def test_relaunch_command_uses_accelerate_with_the_default_zero2_config():
    cmd = relaunch_command(ARGV, {"NUM_GPUS": "8"})
    assert cmd == ["accelerate", "launch", "--config_file", DEFAULT_ACCELERATE_CONFIG, "--num_processes", "8",
                   *ARGV]
    assert (REPO / DEFAULT_ACCELERATE_CONFIG).is_file()


def test_relaunch_command_takes_the_config_from_env():
    cmd = relaunch_command(ARGV, {"NUM_GPUS": "4", "ACCELERATE_CONFIG": "configs/accelerate/zero3.yaml"})
    assert cmd[:6] == ["accelerate", "launch", "--config_file", "configs/accelerate/zero3.yaml",
                       "--num_processes", "4"]


@pytest.mark.parametrize("env", [{}, {"NUM_GPUS": ""}, {"NUM_GPUS": "1"}, {"NUM_GPUS": "0"},
                                 {"NUM_GPUS": "8", "LOCAL_RANK": "0"}, {"NUM_GPUS": "8", "WORLD_SIZE": "8"},
                                 {"NUM_GPUS": "8", RELAUNCHED_ENV: "1"}])
def test_no_relaunch_on_one_gpu_or_under_a_launcher(env):
    assert relaunch_command(ARGV, env) is None


def test_bad_env_is_an_error_naming_it():
    with pytest.raises(ValueError, match="NUM_GPUS"):
        relaunch_command(ARGV, {"NUM_GPUS": "eight"})
    with pytest.raises(FileNotFoundError, match="ACCELERATE_CONFIG"):
        relaunch_command(ARGV, {"NUM_GPUS": "2", "ACCELERATE_CONFIG": "configs/accelerate/nosuch.yaml"})


def test_only_rank_zero_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    assert not is_main_process()
    write_stage_metrics(tmp_path / "train.json", "sft", steps=1)
    save_adapter(object(), object(), tmp_path / "adapter")  # a non-main rank touches neither
    assert not (tmp_path / "train.json").exists() and not (tmp_path / "adapter").exists()
    monkeypatch.setenv("RANK", "0")
    assert is_main_process()
    write_stage_metrics(tmp_path / "train.json", "sft", steps=1)
    assert (tmp_path / "train.json").is_file()


def test_the_exec_path_relaunches_once_under_accelerate(tmp_path):
    config = tmp_path / "cpu.yaml"  # accelerate's CPU path: runs the script in one process without LOCAL_RANK
    config.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
                      "num_machines: 1\nmachine_rank: 0\nmain_training_function: main\nuse_cpu: true\n")
    script = tmp_path / "stage.py"
    script.write_text("import os, sys\nfrom termagent.train.common import relaunch_distributed\n"
                      "relaunch_distributed()\n"
                      f"print('ran', os.environ.get({RELAUNCHED_ENV!r}), sys.argv[1:], flush=True)\n")
    bin_dir = str(Path(sys.executable).parent)  # the venv's `accelerate`
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUM_GPUS": "2", "ACCELERATE_CONFIG": str(config),
           "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    for name in ("LOCAL_RANK", "WORLD_SIZE", "RANK", RELAUNCHED_ENV):
        env.pop(name, None)
    out = subprocess.run([sys.executable, str(script), "--out", "x"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("ran") == 1 and "ran 1 ['--out', 'x']" in out.stdout
    assert out.stderr.count("relaunching as accelerate launch") == 1

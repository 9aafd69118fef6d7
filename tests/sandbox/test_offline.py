"""Public Terminal-Bench tasks offline (issue 11): one fixture task per class of what they assume of their
environment (tests/sandbox/fixtures/offline/README.md), run for real: oracle and nop in containers.

The flavour images (python / tbench / debian) and the trixie root are built on first use and cached by
recipe hash, so only the first run of these tests pays for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from termagent.params import read_sections
from termagent.sandbox import Sandbox, SandboxConfig, run_trials
from termagent.sandbox.agents import NopAgent, OracleAgent
from termagent.sandbox.check import check_entry
from termagent.sandbox.offline import choose_python, host_trust, requested_python, uv_requested
from termagent.sandbox.settings import SandboxParams
from termagent.sandbox.verifier import runner_never_started
from termagent.tasks.load import load_task

from .conftest import FIXTURES, REPO_PARAMS

OFFLINE = FIXTURES / "offline"

CERT_A = "MIIBszCCAVmgAwIBAgIUDistroCertificateAAAAAAAAAAAAAAAwCgYIKoZIzj0EAwIw" * 3
CERT_B = "MIIBszCCAVmgAwIBAgIUProxyCertificateBBBBBBBBBBBBBBBBwCgYIKoZIzj0EAwIw" * 3


def pem(body: str) -> str:
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64)) + \
        "\n-----END CERTIFICATE-----\n"


def test_host_trust_keeps_the_extra_ca_and_index_settings_and_drops_host_local_paths(tmp_path):
    distro = tmp_path / "share" / "mozilla"
    distro.mkdir(parents=True)
    (distro / "a.crt").write_text(pem(CERT_A))
    bundle = tmp_path / "bundle.crt"
    bundle.write_text(pem(CERT_A) + pem(CERT_B))
    pip_config = ("global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
                  "global.index-url='https://index.invalid/simple'\n"
                  "global.extra-index-url='file:///opt/pypi/simple https://extra.invalid/simple'\n"
                  "global.find-links='/opt/wheels'\nglobal.constraint='/etc/xdg/pip/constraints.txt'\n")
    trust = host_trust(env={"SSL_CERT_FILE": str(bundle), "PIP_DEFAULT_TIMEOUT": "180"}, pip_config=pip_config,
                       distro_dir=str(tmp_path / "share"))
    assert trust.ca_pems == (CERT_B,)  # only what the distribution does not already trust
    assert trust.pip == {"index-url": "https://index.invalid/simple",
                         "extra-index-url": "https://extra.invalid/simple", "timeout": "180"}
    assert set(trust.dropped) == {"constraint", "find-links", "extra-index-url (host-local part)"}
    summary = trust.summary()
    assert "index.invalid" not in str(summary) and summary["ca_certificates_added"] == 1


def test_python_version_of_an_image_name_and_the_nearest_available():
    available = {"3.11": "bookworm", "3.13": "trixie"}
    assert requested_python("python", "python:3.13-slim-bookworm") == "3.13"
    assert requested_python("tbench", "ghcr.io/laude-institute/t-bench/python-3-13:20250620") == "3.13"
    assert requested_python("tbench", "ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624") == "3.12"
    assert requested_python("python", "python:slim") is None
    assert choose_python("3.13", available) == "3.13"
    assert choose_python("3.12", available) == "3.13"  # a tie: the newer
    assert choose_python("3.9", available) == "3.11"
    assert choose_python(None, available) == "3.13"
    assert uv_requested("curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh") == ["0.7.13"]


def test_runner_never_started_needs_a_pytest_script_without_summary_or_ctrf():
    task = load_task(OFFLINE / "runner-never-starts")
    out = "/tests/test.sh: line 3: uvx: command not found\n"
    assert "uvx: command not found" in runner_never_started(task, out, ctrf_present=False)
    assert runner_never_started(task, out, ctrf_present=True) is None
    assert runner_never_started(task, "no tests ran in 0.01s\n", ctrf_present=False) is None


# ---- real containers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def offline_sandbox(base_image, docker_client):
    """A Sandbox with params.yaml's alias table and offline settings (the flavours)."""
    params = read_sections(REPO_PARAMS, sandbox=SandboxParams).sandbox
    config = params.sandbox_config(base_image.tag)
    return Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2, output_limit_bytes=16384,
                                 image_aliases=config.image_aliases, offline=config.offline), client=docker_client)


def oracle_and_nop(sandbox, name: str):
    task = load_task(OFFLINE / name)
    oracle, nop = run_trials(sandbox, [(task, OracleAgent(), 0), (task, NopAgent(), 0)], progress=False)
    return task, oracle, nop


def alias_of(result) -> dict:
    (alias,) = [s for s in result.image["substitutions"] if s["what"] == "alias"]
    return alias


@pytest.mark.docker
def test_python_slim_with_pip_install_gets_pip_and_the_requested_python(offline_sandbox):
    _task, oracle, nop = oracle_and_nop(offline_sandbox, "python-pip")
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-2000:]
    assert nop.error is None and nop.reward == 0.0 and nop.passed == 1 and nop.total == 2
    alias = alias_of(oracle)
    assert alias["from"] == "python:3.13-slim" and alias["kind"] == "python" and alias["suite"] == "trixie"
    assert alias["python"]["requested"] == "3.13" and alias["python"]["provided"].startswith("3.13.")
    assert alias["trust"]["ca_certificates_added"] >= 0 and "digest" in alias["trust"]


@pytest.mark.docker
def test_verifier_installing_uv_and_running_uvx_on_the_image_python(offline_sandbox):
    _task, oracle, nop = oracle_and_nop(offline_sandbox, "uv-verifier")
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-2000:]
    assert (oracle.passed, oracle.total) == (2, 2)  # uvx -p 3.13 ran pytest on the image's python3.13
    # the image has python3.13: no interpreter put in for the verifier
    assert oracle.image["verifier_pythons"]["in_image"] == ["3.13"] and oracle.image["verifier_pythons"]["provided"] == {}
    assert "installing to /root/.local/bin" in oracle.verifier_output
    assert nop.error is None and nop.reward == 0.0 and (nop.passed, nop.total) == (1, 2)
    assert alias_of(oracle)["uv"] == {"version": "0.9.5", "how": "curl shim for astral.sh/uv installer URLs",
                                      "requested_by_task": ["0.9.5"]}


@pytest.mark.docker
def test_unpullable_prebuilt_image_falls_back_to_its_dockerfile(offline_sandbox):
    task, oracle, nop = oracle_and_nop(offline_sandbox, "prebuilt-image")
    assert task.environment.memory_mb == 2048 and task.environment.storage_mb == 10240
    assert any("shiny_new_key" in w for w in task.warnings)  # unknown key: warned, not fatal
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-2000:]
    assert nop.error is None and nop.reward == 0.0
    (replaced,) = [s for s in oracle.image["substitutions"] if s["what"] == "prebuilt_image_replaced"]
    assert replaced["docker_image"] == "termagent-fixture-org/prebuilt-image:20251031"
    assert replaced["built_from"] == "environment/Dockerfile"
    assert alias_of(oracle)["kind"] == "debian"


@pytest.mark.docker
def test_tb1_task_without_workdir_inherits_the_tbench_base_conventions(offline_sandbox):
    task, oracle, nop = oracle_and_nop(offline_sandbox, "tb1-tbench-noworkdir")
    assert task.layout == "tb1"
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-2000:]
    assert (oracle.passed, oracle.total) == (3, 3)  # data.txt in /app, tmux + asciinema + python3 there
    assert nop.error is None and nop.reward == 0.0
    alias = alias_of(oracle)
    assert alias["kind"] == "tbench" and alias["workdir"] == "/app"
    assert alias["uv"]["requested_by_task"] == ["0.7.13"]


@pytest.mark.docker
def test_verifier_whose_runner_never_starts_is_a_verifier_error_not_a_zero(offline_sandbox):
    task, oracle, nop = oracle_and_nop(offline_sandbox, "runner-never-starts")
    for result in (oracle, nop):
        assert result.reward is None and result.error["class"] == "VerifierError"
        assert "runner never started" in result.error["message"]
        assert "uvx: command not found" in result.verifier_output
    entry = check_entry(task, oracle, nop)
    assert not entry["ok"] and "uvx: command not found" in entry["oracle"]["verifier_tail"]


def test_fixture_readme_lists_every_fixture():
    readme = (OFFLINE / "README.md").read_text()
    assert all(f"- {p.name}:" in readme for p in Path(OFFLINE).iterdir() if p.is_dir())


# ---- issue 29: the classes of public tasks that failed offline --------------------------------------------


def test_uv_python_requests_are_read_from_the_test_scripts():
    from termagent.sandbox.pythons import uv_python_requests

    assert uv_python_requests("uvx \\\n  -p 3.13 \\\n  -w pytest==8.4.1 pytest") == ["3.13"]
    assert uv_python_requests("uv run --python=3.12 pytest", "UV_PYTHON=cpython-3.9 uv venv") == ["3.9", "3.12"]
    assert uv_python_requests("python3 -m pytest -p no:cacheprovider", "uv pip install pytest") == []


@pytest.mark.docker
def test_verifier_asking_uv_for_a_python_the_image_lacks_gets_one_the_agent_never_sees(offline_sandbox):
    """Class 1: `uvx -p 3.13` on an Ubuntu base (bookworm stand-in, python3 3.11) found no interpreter."""
    _task, oracle, nop = oracle_and_nop(offline_sandbox, "uv-python-missing")
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-3000:]
    assert (oracle.passed, oracle.total) == (2, 2)  # the tests ran on 3.13
    assert nop.error is None and nop.reward == 0.0 and (nop.passed, nop.total) == (1, 2)
    provided = oracle.image["verifier_pythons"]
    assert provided["requested"] == ["3.13"] and provided["provided"]["3.13"]["suite"] == "trixie"
    assert provided["in_image"] == [] and provided["unavailable"] == {}
    assert alias_of(oracle)["kind"] == "debian" and alias_of(oracle)["suite"] == "bookworm"


@pytest.mark.docker
def test_the_agent_phase_has_no_verifier_python(offline_sandbox):
    task = load_task(OFFLINE / "uv-python-missing")
    with offline_sandbox.trial(task, agent_name="probe") as trial:
        assert trial.exec("command -v python3.13 || echo none").output.strip() == "none"
        assert trial.exec("ls /opt/termagent/python 2>&1 || true").output.strip().endswith("No such file or directory")


@pytest.mark.docker
def test_verifier_asking_for_a_python_nobody_supplies_says_so(offline_sandbox):
    """Class 1 / 6: 3.12 is neither in the image nor in sandbox.offline.verifier_pythons."""
    task, oracle, nop = oracle_and_nop(offline_sandbox, "uv-python-unavailable")
    for result in (oracle, nop):
        assert result.reward is None and result.error["class"] == "VerifierError"
        assert "No interpreter found for Python 3.12" in result.verifier_output
        assert "not available offline: 3.12" in result.error["message"]
    entry = check_entry(task, oracle, nop)
    assert entry["class"] == "VerifierError" and "3.12" in entry["failures"][0]["cause"]
    assert "No interpreter found" in entry["failures"][0]["tail"]


@pytest.mark.docker
def test_pip_may_upgrade_what_the_python_stand_in_got_from_debian(offline_sandbox):
    """Class 2: `pip install --upgrade pip` / packaging failed: 'Cannot uninstall ... installed by debian'."""
    task, oracle, nop = oracle_and_nop(offline_sandbox, "tb1-pip-upgrades-debian")
    assert task.layout == "tb1"
    assert oracle.error is None and oracle.reward == 1.0, (oracle.error, oracle.verifier_output[-2000:])
    assert nop.error is None and nop.reward == 0.0
    assert alias_of(oracle)["kind"] == "python" and alias_of(oracle)["python"]["provided"].startswith("3.13.")


@pytest.mark.docker
def test_copy_to_dot_or_to_an_image_directory_goes_into_it_when_placed(offline_sandbox):
    """Class 3: `WORKDIR /app` + `COPY data.csv .` was placed as a file named /app: 'Cannot mkdir: /app is
    not a directory' at container start."""
    _task, oracle, nop = oracle_and_nop(offline_sandbox, "copy-into-workdir")
    assert oracle.image.get("placed") is True  # the no-build path, the one that got it wrong
    assert oracle.error is None and oracle.reward == 1.0, (oracle.error, oracle.verifier_output[-2000:])
    assert nop.error is None and nop.reward == 0.0 and (nop.passed, nop.total) == (1, 2)


@pytest.mark.docker
def test_solution_using_the_official_python_layout_passes_in_the_stand_in(offline_sandbox):
    """Class 4: the solution installs for /usr/local/bin/python (site-packages, a shebang) and the test runs
    `python /app/report.py`: reward 0 in the stand-in, with no error class."""
    task, oracle, nop = oracle_and_nop(offline_sandbox, "python-local-bin")
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-2000:]
    assert (oracle.passed, oracle.total) == (3, 3)
    assert nop.error is None and nop.reward == 0.0
    entry = check_entry(task, nop, nop)  # an oracle scoring 0 is classed; a missing /app file is no environment cause
    (failure,) = entry["failures"]
    assert failure["class"] == "OracleFailed" and "environment" not in failure and failure["tail"]


def test_an_oracle_failing_for_its_environment_says_so():
    """What the stand-in printed before the fix for class 4: the line blaming the environment is the cause."""
    from termagent.sandbox.check import environment_cause

    out = ("/tests/test.sh: line 2: /app/report.py: /usr/local/bin/python3: bad interpreter: No such file or directory\n"
           "E   ModuleNotFoundError: No module named 'greeting'\n=== 1 failed, 2 passed in 0.1s ===\n")
    assert environment_cause(out) == "E   ModuleNotFoundError: No module named 'greeting'"
    assert environment_cause("python: can't open file '/app/report.py': [Errno 2] No such file or directory") is None
    assert "bad interpreter" in environment_cause(out.splitlines()[0])


@pytest.mark.docker
def test_nop_that_passes_is_classed_vacuous_or_flaky(offline_sandbox):
    """Class 5: a speed test whose reference the untouched environment already contains."""
    task, oracle, nop = oracle_and_nop(offline_sandbox, "nop-passes-timing")
    assert oracle.error is None and oracle.reward == 1.0, oracle.verifier_output[-2000:]
    assert nop.error is None and nop.reward == 1.0
    rerun = run_trials(offline_sandbox, [(task, NopAgent(), 1)], progress=False)
    entry = check_entry(task, oracle, nop, rerun)
    assert not entry["ok"] and entry["class"] == "NopPassesVacuous", entry["failures"]
    assert entry["failures"][0]["reruns"] == [{"reward": 1.0, "error": None}] and entry["failures"][0]["tail"]
    # a rerun that scores 0 (another task's nop, as a timing test's would under other load): flaky
    _t, _o, zero = oracle_and_nop(offline_sandbox, "copy-into-workdir")
    flaky = check_entry(task, oracle, nop, [zero])
    assert flaky["class"] == "NopPassesFlaky" and "then 0" in flaky["failures"][0]["cause"]

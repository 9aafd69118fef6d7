"""agent.protocol harbor-terminus-2: what our agent loop and demos send equals what Harbor's terminus-2 sends.

The expected messages are computed with Harbor's own code where it can run here: `TmuxSession`'s capture
methods and `Terminus2._limit_output_length` / `_get_completion_confirmation_message` are executed from the
pinned Harbor wheel's source (ast-extracted, driven against the same container), the first prompt is the
wheel's template file filled as `Terminus2.run` does, and replies are judged by the wheel's parser. The
wheel comes from the `harbor_wheel` fixture (tests/conftest.py: fetched once into ~/.cache/termagent/wheels
with `pip download --no-deps`; without network the tests skip and say so).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import shutil
import subprocess
import textwrap
import types
import zipfile
from pathlib import Path

import pytest

from termagent.agent import AgentConfig, TerminusAgent, expand_turns
from termagent.policy import Generation
from termagent.protocol import format_observation, render_initial_prompt
from termagent.protocol.harbor import HarborPackageError, Terminus2Texts, load_json_parser, locate_harbor
from termagent.protocol.protocols import HARBOR_FIX, get_protocol

HARBOR_VERSION = "0.25.0"
FIXTURE = Path(__file__).resolve().parents[1] / "agent" / "fixtures" / "count-lines"
T2 = "harbor/agents/terminus_2/"


@pytest.fixture(scope="module")
def wheel(harbor_wheel) -> Path:
    return harbor_wheel


def wheel_text(wheel: Path, rel: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        return z.read(T2 + rel).decode()


def harbor_methods(wheel: Path, rel: str, cls: str, names: list[str]) -> dict:
    """Methods of Harbor's class `cls`, compiled from the wheel's own source (they cannot be imported here:
    Harbor needs Python >= 3.12 and its dependencies)."""
    source = wheel_text(wheel, rel)
    tree = ast.parse(source)
    [klass] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    namespace: dict = {"asyncio": asyncio}
    out = {}
    for node in klass.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            exec(textwrap.dedent(ast.get_source_segment(source, node)), namespace)  # noqa: S102
            out[node.name] = namespace[node.name]
    assert sorted(out) == sorted(names), f"{cls} in {rel} lacks {set(names) - set(out)}"
    return out


class HarborTerminus:
    """Harbor's TmuxSession capture + Terminus2's output limit and confirmation, run from the wheel's
    code against a tmux session `session` in `trial`'s container."""

    def __init__(self, wheel: Path, trial, session: str = "agent"):
        tmux = harbor_methods(wheel, "tmux_session.py", "TmuxSession",
                              ["_tmux_start_session", "_tmux_capture_pane", "capture_pane", "_get_visible_screen",
                               "_find_new_content", "get_incremental_output"])
        agent = harbor_methods(wheel, "terminus_2.py", "Terminus2",
                               ["_limit_output_length", "_get_completion_confirmation_message"])
        attrs = {k: v for k, v in tmux.items() if k != "_tmux_start_session"}
        attrs["_tmux_start_session"] = property(tmux["_tmux_start_session"])
        attrs.update(agent)
        session_cls = type("HarborSession", (), attrs)
        self.s = session_cls()
        self.s.__dict__.update(_session_name=session, _previous_buffer=None, _user=None, _extra_env={},
                               _pane_width=160, _pane_height=40, _logging_path="/tmp/terminus_2.pane",
                               options=types.SimpleNamespace(parser_name="json"))

        class Environment:
            async def exec(self, command, user=None, **_):
                result = trial.exec(command, timeout=30)
                return types.SimpleNamespace(stdout=result.output, return_code=result.rc, stderr="")

        self.s.environment = Environment()

    def incremental_output(self) -> str:
        return asyncio.run(self.s.get_incremental_output())

    def visible_screen(self) -> str:
        return asyncio.run(self.s._get_visible_screen())

    def limit(self, text: str) -> str:
        return self.s._limit_output_length(text)

    def confirmation(self, terminal_output: str) -> str:
        return self.s._get_completion_confirmation_message(terminal_output)


# ---- no container ---------------------------------------------------------------------------------------

def test_every_text_is_read_from_the_package_dir_or_wheel(wheel, tmp_path):
    texts = Terminus2Texts.load(locate_harbor(wheel))
    assert texts.harbor.version == HARBOR_VERSION
    assert texts.initial_prompt == wheel_text(wheel, "templates/terminus-json-plain.txt")
    # The same texts from an unpacked package directory, found through $HARBOR_PACKAGE_DIR.
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path)
    from_dir = locate_harbor(tmp_path)  # a site-packages holding harbor/
    assert from_dir.location == tmp_path / "harbor" and not from_dir.is_wheel
    assert Terminus2Texts.load(from_dir).fingerprint() == texts.fingerprint()


def test_limit_and_parser_are_harbors(wheel):
    protocol = get_protocol("harbor-terminus-2", harbor_package=str(wheel), harbor_version=HARBOR_VERSION)
    limit = harbor_methods(wheel, "terminus_2.py", "Terminus2", ["_limit_output_length"])["_limit_output_length"]
    for text in ["short", "é" * 9000 + "tail", "x\n" * 20000]:
        assert protocol.limit(text) == limit(None, text)
    # An observation after commands ran is limited twice (Terminus2._execute_commands, then the loop), which
    # cuts an already cut output again; the completion question gets it limited once.
    big = "é" * 20000
    shown = limit(None, protocol.texts.new_output.format(content=big))
    assert protocol.observation(big, incremental=True) == limit(None, shown) != shown
    assert protocol.observation(big, incremental=True, confirm_completion=True) == (
        protocol.texts.confirmation.format(terminal_output=shown))
    parser = load_json_parser(locate_harbor(wheel))
    reply = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls"}, {"keystrokes": "pwd\\n"}]} thanks'
    parsed = protocol.parse(reply)
    assert parsed.ok and [c.keystrokes for c in parsed.response.commands] == ["ls", "pwd\n"]
    assert protocol.warning_text(parsed.warnings) == parser.parse_response(reply).warning
    broken = '{"analysis": "a", "plan": "p", "commands": []'
    fixed = protocol.parse(broken)
    assert fixed.ok and fixed.fixes == [HARBOR_FIX]  # GRPO's strict format refuses it, as for our parser
    bad = protocol.parse("no json here")
    assert not bad.ok and bad.errors == [parser.parse_response("no json here").error]
    cut = protocol.observation(output_cut=True, max_output_tokens=4096, warnings=["w"])
    assert cut.startswith(protocol.texts.output_cut.format(limit_str="4096 tokens"))
    assert cut.endswith(protocol.texts.output_cut_warnings.format(warning="- w"))


def test_clear_errors(wheel, tmp_path, monkeypatch):
    with pytest.raises(HarborPackageError, match="agent.harbor_version is '0.1.0'"):
        get_protocol("harbor-terminus-2", harbor_package=str(wheel), harbor_version="0.1.0")
    with pytest.raises(HarborPackageError, match="neither a harbor-"):
        get_protocol("harbor-terminus-2", harbor_package=str(tmp_path), harbor_version=None)
    with pytest.raises(ValueError, match="max_observation_bytes is 500"):
        get_protocol("harbor-terminus-2", harbor_package=str(wheel), max_observation_bytes=500)
    with pytest.raises(ValueError, match="protocol must be"):
        AgentConfig(protocol="terminus-3")
    # A Harbor whose terminus-2 moved a text: the error names the file and the function.
    pkg = tmp_path / "pkg"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(pkg)
    agent_py = pkg / T2 / "terminus_2.py"
    agent_py.write_text(agent_py.read_text().replace("def _get_completion_confirmation_message",
                                                     "def _confirmation_renamed"))
    monkeypatch.setenv("HARBOR_PACKAGE_DIR", str(pkg))
    with pytest.raises(HarborPackageError, match=r"terminus_2.py, _get_completion_confirmation_message\(\)"):
        get_protocol("harbor-terminus-2", harbor_version=None)


def test_the_default_protocol_text_is_unchanged():
    protocol = get_protocol()
    parts = [protocol.initial_prompt("Count the lines of /app/notes.txt.\n", "root@sandbox:/app#"),
             protocol.observation("root@sandbox:/app# ls\nnotes.txt\nroot@sandbox:/app#"),
             protocol.observation("", incremental=True),
             protocol.observation("screen", incremental=False, confirm_completion=True),
             protocol.observation(errors=["bad"], warnings=["w"]), protocol.observation("x", warnings=["w1", "w2"]),
             protocol.observation(output_cut=True, max_output_tokens=256), protocol.observation("y" * 30000)]
    assert parts[0] == render_initial_prompt("Count the lines of /app/notes.txt.\n", "root@sandbox:/app#")
    assert parts[1] == format_observation("root@sandbox:/app# ls\nnotes.txt\nroot@sandbox:/app#")
    # sha256 of the same renderings at a79a485, before the protocol option existed
    assert hashlib.sha256("\0".join(parts).encode()).hexdigest() == (
        "1634238f749f447834d6b91e2437ef0ef782fef94c04c8fa802a3c6edaa1f496")


# ---- real containers ------------------------------------------------------------------------------------

def reply(commands: list[dict], done: bool = False) -> str:
    return json.dumps({"analysis": "looking", "plan": "next", "commands": commands, "task_complete": done})


class HarborWatchPolicy:
    """Replies from a script; before each call it computes, with Harbor's own code on the same tmux
    session, the message terminus-2 would send now, so the test can compare it with what our loop sent."""

    name = "harbor-watch"

    def __init__(self, wheel: Path, script: list[str]):
        self.wheel, self.script = wheel, list(script)
        self.harbor: HarborTerminus | None = None
        self.calls: list[tuple[list[dict], str | None]] = []  # (messages, terminus-2's terminal text)

    def attach(self, trial) -> None:
        self.harbor = HarborTerminus(self.wheel, trial)

    def count_tokens(self, messages):
        return sum(len(m["content"]) for m in messages) // 4

    def generate(self, batch, *, max_tokens, temperature, seed=None, top_p=1.0):
        messages = batch[0]
        previous = self.calls[-1][2] if self.calls else None
        # Terminus-2 captures once per turn that ran commands (and at the start), never after a parse error.
        ran = previous is None or previous.startswith("{")
        self.calls.append((messages, self.harbor.incremental_output() if ran else None, None))
        text = self.script.pop(0)
        self.calls[-1] = (messages, self.calls[-1][1], text)
        return [Generation(text, "stop", self.count_tokens(messages), len(text) // 4)]


class Attached:
    """The sandbox agent: hands the trial to the policy (for Harbor's capture), then runs `agent`."""

    def __init__(self, agent, policy):
        self.agent, self.policy, self.name = agent, policy, agent.name

    def run(self, trial, task):
        self.policy.attach(trial)
        return self.agent.run(trial, task)


@pytest.fixture(scope="module")
def sandbox(base_image, docker_client):
    from termagent.sandbox import Sandbox, SandboxConfig

    return Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=2), client=docker_client)


@pytest.mark.docker
def test_an_episode_sends_exactly_what_terminus_2_sends(wheel, sandbox):
    from termagent.sandbox import run_trial
    from termagent.tasks.load import load_task

    task = load_task(FIXTURE)
    texts = Terminus2Texts.load(locate_harbor(wheel))
    parser = load_json_parser(locate_harbor(wheel))
    no_duration = reply([{"keystrokes": "wc -l < /app/notes.txt > /app/count.txt\n"}])  # a parser warning
    script = [reply([{"keystrokes": "echo hello\n", "duration": 0.5}]), no_duration, reply([], done=True),
              "I think it is done.", reply([], done=True)]
    policy = HarborWatchPolicy(wheel, script)
    config = AgentConfig(max_turns=8, protocol="harbor-terminus-2", harbor_package=str(wheel))
    result = run_trial(sandbox, task, Attached(TerminusAgent(policy, config), policy))
    assert result.error is None, result.error
    episode = result.agent_result
    assert result.reward == 1.0 and episode["ended_by"] == "task_complete"
    assert episode["protocol"]["harbor"]["version"] == HARBOR_VERSION
    h = policy.harbor
    (m1, out1, _), (m2, out2, _), (m3, out3, _), (m4, out4, _), (m5, out5, _) = policy.calls
    # 1. The first prompt: the wheel's template, filled as Terminus2.run does.
    assert out1.startswith(texts.screen.format(screen=""))  # the first capture is the screen
    assert len(m1) == 1 and m1[0]["role"] == "user"
    assert m1[0]["content"] == wheel_text(wheel, "templates/terminus-json-plain.txt").format(
        instruction=task.instruction, terminal_state=h.limit(out1))
    # 2. New output, limited twice (_execute_commands, then the loop).
    assert out2.startswith(texts.new_output.format(content="")) and "hello" in out2
    assert m2[-1]["content"] == h.limit(h.limit(out2))
    # 3. The parser's warnings before the output.
    warning = parser.parse_response(no_duration).warning
    assert warning and m3[-1]["content"] == texts.warning_observation.format(
        feedback=texts.feedback_warning.format(warning=warning), _limit_output_length=h.limit(h.limit(out3)))
    # 4. The completion question (Harbor's own method on the limited output).
    assert m4[-1]["content"] == h.confirmation(h.limit(out4))
    # 5. A reply that is no JSON: Harbor's parse-error prompt; the question is still pending.
    bad = parser.parse_response("I think it is done.")
    assert out5 is None and m5[-1]["content"] == texts.parse_error_prompt.format(
        feedback=texts.feedback_error.format(error=bad.error) + texts.feedback_error_warning.format(
            warning=bad.warning), _get_error_response_type=texts.error_response_type)
    assert [t["parse_ok"] for t in expand_turns(episode)] == [True, True, True, False, True]


@pytest.mark.docker
def test_a_demo_first_prompt_is_terminus_2s(wheel, base_image, docker_client, tmp_path):
    """A demo's first message equals what terminus-2 sends for the task: the wheel's template with the
    screen of a fresh container of the task, where tmux was started and captured by Harbor's own code."""
    from termagent.sandbox import Sandbox, SandboxConfig
    from termagent.tasks.load import load_task
    from termagent.train.demos import DemosConfig, build_demos

    task = load_task(FIXTURE)
    sandbox = Sandbox(SandboxConfig(base_image=base_image.tag, concurrency=1), client=docker_client)
    out = tmp_path / "demos.jsonl"
    config = AgentConfig(max_turns=8, protocol="harbor-terminus-2", harbor_package=str(wheel))
    stats = build_demos([task], sandbox, DemosConfig(), config, out, progress=False)
    assert stats["n_demos"] == 1, stats
    conv = json.loads(out.read_text())["conversations"]
    texts = Terminus2Texts.load(locate_harbor(wheel))
    assert conv[2]["content"].startswith(texts.new_output.format(content=""))
    assert conv[-2]["content"].startswith(texts.confirmation.split("{terminal_output}")[0])

    with sandbox.trial(task, agent_name="harbor-probe") as trial:
        harbor = HarborTerminus(wheel, trial, session="terminus-2")
        start = trial.exec(harbor.s._tmux_start_session, timeout=30)
        assert start.rc == 0, start.output
        for _ in range(200):  # until bash has drawn its prompt (Harbor's run() comes well after start())
            if harbor.visible_screen().strip():
                break
            trial.exec("sleep 0.05", timeout=10)
        terminal_state = harbor.limit(harbor.incremental_output())
    expected = wheel_text(wheel, "templates/terminus-json-plain.txt").format(
        instruction=task.instruction, terminal_state=terminal_state)
    assert conv[0] == {"role": "user", "content": expected}


def test_grpo_prompts_use_the_protocol(wheel):
    from termagent.tasks.load import load_task
    from termagent.train.single_turn import EnvConfig, SingleTurnEnv

    task = load_task(FIXTURE)
    env = SingleTurnEnv(None, [task], EnvConfig(protocol="harbor-terminus-2", harbor_package=str(wheel)))
    assert env.terminal_config().capture == "harbor"
    env.screens[task.id] = "root@sandbox:/app# \n" + "\n" * 39
    [message] = env.prompt(task.id)
    texts = Terminus2Texts.load(locate_harbor(wheel))
    assert message["content"] == texts.initial_prompt.format(
        instruction=task.instruction, terminal_state=texts.screen.format(screen=env.screens[task.id]))
    assert SingleTurnEnv(None, [task]).protocol.name == "termagent"


def test_no_harbor_text_in_the_repository(wheel):
    """The templates are read at run time, never copied: no line of terminus-2's prompt is in our files."""
    repo = Path(__file__).resolve().parents[2]
    lines = [ln.strip() for ln in wheel_text(wheel, "templates/terminus-json-plain.txt").splitlines()
             if len(ln.strip()) > 40]
    assert lines
    tracked = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    for rel in tracked:
        path = repo / rel
        if path.suffix not in {".py", ".md", ".txt", ".yaml", ".jinja", ".json"} or not path.is_file():
            continue
        content = path.read_text(errors="ignore")
        assert not any(ln in content for ln in lines), f"{rel} holds text of Harbor's terminus-2 prompt"
    assert shutil.which("git")

import json

from termagent.evaluate.outputs import write_eval_outputs
from termagent.evaluate.viewer import render_trajectory

EVIL = '<script>alert("pwned")</script>'


def trajectory(task, attempt, reward, *, error=None, completion='{"analysis": "look"}'):
    return {
        "task_id": task, "attempt": attempt, "model": "base", "reward": reward,
        "error": {"class": error, "message": "too slow"} if error else None,
        "n_turns": 1, "tokens": {"in": 11, "out": 7}, "summarizations": 0,
        "turns": [{
            "messages_in": [{"role": "system", "content": "You are an agent."},
                            {"role": "user", "content": "Task: count lines & report"}],
            "completion": completion, "parse_ok": True, "warnings": [],
            "keystrokes": ["wc -l file.txt\n"], "rc": 0,
            "observation": "42 file.txt", "t_start": 1.0, "t_end": 2.5,
        }],
    }


def test_viewer_pages_show_turns_escaped(tmp_path):
    trajs = [
        trajectory("count-lines", 0, 1.0),
        trajectory("count-lines", 1, 0.0, completion=EVIL),
        trajectory("fix-script", 0, 0.0, error="AgentTimeoutError"),
    ]
    metrics = write_eval_outputs(trajs, out_dir=tmp_path / "eval", metrics_path=tmp_path / "m.json",
                                 model="base", protocol={"temperature": 0.7}, wall_s=3.0)
    assert metrics["accuracy"] == 0.25  # attempt 0: 1/2, attempt 1: 0/1

    index = (tmp_path / "eval" / "index.html").read_text()
    assert "<table>" in index and "count-lines" in index and "fix-script" in index
    assert 'href="trajectories/count-lines__1.html"' in index
    assert "AgentTimeoutError" in index
    assert "<script" not in index and "cdn" not in index.lower() and "<style>" in index

    page = (tmp_path / "eval" / "trajectories" / "count-lines__1.html").read_text()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in page
    assert "wc -l file.txt" in page and "42 file.txt" in page
    assert "count lines &amp; report" in page
    assert "reward: <b" in page and ">0.0</b>" in page
    ok = (tmp_path / "eval" / "trajectories" / "count-lines__0.html").read_text()
    assert ">1.0</b>" in ok and "exit status <b>0</b>" in ok

    index_json = json.loads((tmp_path / "eval" / "index.json").read_text())
    assert [(r["task_id"], r["attempt"]) for r in index_json] == [
        ("count-lines", 0), ("count-lines", 1), ("fix-script", 0)]
    saved = json.loads((tmp_path / "eval" / "trajectories" / "count-lines__1.json").read_text())
    assert saved["turns"][0]["completion"] == EVIL
    assert json.loads((tmp_path / "m.details.json").read_text())["errors"] == {"AgentTimeoutError": 1}
    assert json.loads((tmp_path / "m.json").read_text())["agent_timeouts"] == 1


def test_trajectory_without_turns_renders():
    html = render_trajectory({"task_id": "t", "attempt": 0, "reward": None,
                              "error": {"class": "BuildError", "message": "no image"}})
    assert "BuildError" in html and "no image" in html

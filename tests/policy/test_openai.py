"""The OpenAI-compatible policy: against `transformers serve` running the tiny model, and against a small
scripted HTTP server on 127.0.0.1 for the error paths (the real client runs in both)."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from termagent.policy import ContextLengthExceeded, PolicyError, make_policy
from termagent.serve import free_port, serving

KEY = "sk-test-0123456789-secret"
HELLO = [{"role": "user", "content": "List the files in /app."}]
VLLM_CONTEXT_ERROR = {"object": "error", "type": "BadRequestError", "code": 400, "message":
                      "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens "
                      "(31808 in the messages, 8192 in the completion). Please reduce the length."}


def completion(text="{}", finish_reason="stop", prompt_tokens=11, completion_tokens=3) -> dict:
    return {"id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


class ScriptedServer:
    """Answers POST /v1/chat/completions with the scripted (status, body) replies in order (the last one
    repeats) and GET /v1/models with `models`; records every request. `echo_auth` puts the request's
    Authorization header in the reply body, as a careless server might."""

    def __init__(self, replies, models=({"id": "m"},), echo_auth=False):
        self.replies, self.models, self.echo_auth = list(replies), list(models), echo_auth
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": server.models})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                status, reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
                if server.echo_auth:
                    reply = {**reply, "debug": f"got header {self.headers.get('Authorization')}"}
                self._send(status, reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    servers = []

    def start(*args, **kwargs):
        servers.append(ScriptedServer(*args, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def fast(url: str, **kw):
    return make_policy(f"openai:{url}", **kw)


def test_retries_503_then_succeeds_and_sends_an_explicit_max_tokens(scripted):
    server = scripted([(503, {"error": "busy"}), (503, {"error": "busy"}), (200, completion("hi"))])
    [gen] = fast(server.url).generate([HELLO], max_tokens=64, temperature=0.7, seed=3)
    assert gen.text == "hi" and gen.finish_reason == "stop"
    assert (gen.prompt_tokens, gen.completion_tokens) == (11, 3)
    assert len(server.requests) == 3
    body = server.requests[-1]["body"]
    assert body["max_tokens"] == 64 and body["temperature"] == 0.7 and body["seed"] == 3
    assert body["model"] == "m" and body["messages"] == HELLO  # model name discovered from /v1/models
    assert server.requests[-1]["auth"] == f"Bearer {KEY}"


def test_retries_are_bounded(scripted):
    server = scripted([(500, {"error": "boom"})])
    with pytest.raises(PolicyError, match="after 3 attempts: HTTP 500"):
        fast(server.url, max_retries=2).generate([HELLO], max_tokens=8, temperature=0)
    assert len(server.requests) == 3


def test_vllm_context_length_400_is_context_length_exceeded_and_not_retried(scripted):
    server = scripted([(400, VLLM_CONTEXT_ERROR)])
    with pytest.raises(ContextLengthExceeded, match="maximum context length") as error:
        fast(server.url).generate([HELLO], max_tokens=8192, temperature=0)
    assert error.value.limit == 32768
    assert len(server.requests) == 1


def test_other_400s_are_plain_errors(scripted):
    server = scripted([(400, {"error": {"message": "unknown field 'foo'"}})])
    with pytest.raises(PolicyError, match="HTTP 400") as error:
        fast(server.url).generate([HELLO], max_tokens=8, temperature=0)
    assert not isinstance(error.value, ContextLengthExceeded) and len(server.requests) == 1


def test_finish_reason_length_and_usage_pass_through(scripted):
    server = scripted([(200, completion('{"analysis": "cut', finish_reason="length", completion_tokens=8))])
    [gen] = fast(server.url).generate([HELLO], max_tokens=8, temperature=0)
    assert gen.finish_reason == "length" and gen.completion_tokens == 8 and gen.completion_ids is None


def test_a_batch_is_one_request_per_conversation_with_distinct_seeds(scripted):
    server = scripted([(200, completion("x"))])
    gens = fast(server.url).generate([HELLO] * 3, max_tokens=8, temperature=1.0, seed=10)
    assert len(gens) == 3 and len(server.requests) == 3
    assert sorted(r["body"]["seed"] for r in server.requests) == [10, 11, 12]


def test_model_discovery_needs_one_model_or_one_lora(scripted):
    two = [{"id": "base"}, {"id": "other"}]
    server = scripted([(200, completion())], models=two)
    with pytest.raises(PolicyError, match="pass model=NAME"):
        fast(server.url).generate([HELLO], max_tokens=8, temperature=0)
    lora = [{"id": "termagent", "max_model_len": 32768}, {"id": "adapter", "parent": "termagent"}]
    server = scripted([(200, completion())], models=lora)
    policy = fast(server.url)
    policy.generate([HELLO], max_tokens=8, temperature=0)
    assert server.requests[-1]["body"]["model"] == "adapter" and policy.name == "adapter"
    named = fast(server.url, model="termagent")
    assert named.context_limit == 32768  # vLLM reports max_model_len: a real limit, not a guess


def test_without_a_tokenizer_count_tokens_is_a_clear_error(scripted):
    server = scripted([(200, completion())])
    policy = fast(server.url)
    assert policy.context_limit is None
    with pytest.raises(PolicyError, match="tokenizer=DIR"):
        policy.count_tokens(HELLO)


def test_context_limit_of_an_unreachable_server_is_none_without_retrying(caplog):
    policy = fast(f"http://127.0.0.1:{free_port()}")
    assert policy.context_limit is None
    assert "retry" not in caplog.text  # reading an attribute does not go through the retry schedule


def test_the_key_never_appears_in_errors_reprs_or_logs(scripted, caplog):
    caplog.set_level(logging.DEBUG)
    failures = []
    for status in (401, 503):
        server = scripted([(status, {"error": "denied"})], echo_auth=True)
        policy = fast(server.url, max_retries=1)
        with pytest.raises(PolicyError) as error:
            policy.generate([HELLO], max_tokens=8, temperature=0)
        assert server.requests[0]["auth"] == f"Bearer {KEY}"  # it was sent, and echoed back
        failures.append(error.value)
        assert KEY not in repr(vars(policy)) and KEY not in repr(policy)
    closed = fast(f"http://127.0.0.1:{free_port()}", max_retries=1)
    with pytest.raises(PolicyError, match="failed after 2 attempts") as error:
        closed.generate([HELLO], max_tokens=8, temperature=0)
    failures.append(error.value)
    for failure in failures:
        assert KEY not in str(failure) and KEY not in repr(failure)
    assert "***" in str(failures[0])  # the echoed header was redacted, not dropped silently
    assert "(retry 1 of 1)" in caplog.text and KEY not in caplog.text  # the SDK retried, and logged no key


@pytest.mark.slow
def test_against_transformers_serve_running_the_tiny_model(tiny_model_dir):
    with serving(tiny_model_dir) as base_url:
        policy = make_policy(f"openai:{base_url}", tokenizer=str(tiny_model_dir))
        [gen] = policy.generate([HELLO], max_tokens=5, temperature=1.0, seed=0)
        assert policy.model == str(tiny_model_dir.resolve())  # the name transformers serve is pinned to
        # the server counted the prompt with the same tokenizer and chat template as the policy does
        assert gen.prompt_tokens == policy.count_tokens(HELLO)
        assert 0 < gen.completion_tokens <= 5
        assert gen.finish_reason == ("length" if gen.completion_tokens == 5 else "stop")
        [greedy] = policy.generate([HELLO], max_tokens=4, temperature=0.0)
        assert greedy.completion_tokens == 4 and isinstance(greedy.text, str)

"""Any OpenAI-compatible chat endpoint: vLLM, `transformers serve`, hosted APIs.

Spec: `openai:URL[,model=NAME][,tokenizer=DIR][,context_limit=N][,api_key_env=VAR]`.
URL is the server's base (`http://127.0.0.1:8000` or `.../v1`). Without `model`, the name comes from
`/v1/models` (the only model listed, or the only LoRA module of a vLLM server). The API key is read from
the environment (`api_key_env`, default OPENAI_API_KEY) at each request and is never stored, logged or
put in an error message. Requests go through the openai SDK, whose own retries (exponential backoff with
jitter, Retry-After honoured) cover connection errors, 408, 409, 429 and 5xx. Token counting needs the policy's own tokenizer (`tokenizer=DIR`): without it
`count_tokens` raises and `context_limit` is only what the server reports (vLLM's `max_model_len`).
"""

from __future__ import annotations

import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai

from termagent.policy.base import ContextLengthExceeded, Generation, Policy, PolicyError
from termagent.redact import redact

# What the SDK retries (openai._base_client._should_retry), for the attempt count in error messages.
RETRY_STATUS = {408, 409, 429} | set(range(500, 600))
# vLLM: "This model's maximum context length is 32768 tokens. However, you requested ..."; OpenAI:
# code "context_length_exceeded"; others say "context length" / "context window".
CONTEXT_ERROR = re.compile(r"maximum context length|context[ _]length|context window", re.IGNORECASE)
CONTEXT_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)


class OpenAIPolicy(Policy):
    def __init__(
        self,
        url: str,
        model: str | None = None,
        tokenizer: str | Path | None = None,
        context_limit: int | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_retries: int = 5,
        timeout_s: float = 600.0,
        concurrency: int = 8,
        name: str | None = None,
    ):
        url = url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        self.model = model
        self.api_key_env = api_key_env
        self.max_retries = max_retries
        self.concurrency = max(1, concurrency)
        self._explicit_name = name
        self._explicit_limit = context_limit or None
        self._model_card: dict | None = None
        self._lock = threading.Lock()
        # The key is passed per request (`_sdk`), so the client holds a placeholder only.
        self._client = openai.OpenAI(base_url=self.base_url, api_key="unset", max_retries=self.max_retries,
                                     timeout=httpx.Timeout(timeout_s, connect=10.0))
        self.tokenizer = None
        if tokenizer:
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))

    # -- identity ---------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._explicit_name or self.model or self.base_url

    @property
    def context_limit(self) -> int | None:
        if self._explicit_limit:
            return self._explicit_limit
        try:  # one quick try: an attribute read must not sit through the retry schedule
            card = self._resolve_model(retries=0)
        except PolicyError:
            return None
        limit = card.get("max_model_len")  # vLLM reports it; transformers serve and OpenAI do not
        return int(limit) if limit else None

    def _resolve_model(self, retries: int | None = None) -> dict:
        """The /v1/models entry of the model requests go to (fetched once)."""
        with self._lock:
            if self._model_card is not None:
                return self._model_card
            response = self._request("GET", "/models", retries=retries, timeout_s=30.0)
            cards = response.get("data") or [] if isinstance(response, dict) else []
            if self.model:
                card = next((c for c in cards if c.get("id") == self.model), {"id": self.model})
            elif len(cards) == 1:
                card = cards[0]
            else:
                # a vLLM server with one LoRA lists the base and the adapter: the adapter is what was served
                adapters = [c for c in cards if c.get("parent")]
                if len(adapters) != 1:
                    ids = [c.get("id") for c in cards]
                    raise PolicyError(f"{self.base_url}/models lists {ids}: pass model=NAME (--model)")
                card = adapters[0]
            if not card.get("max_model_len") and card.get("parent"):
                # vLLM lists a LoRA module without max_model_len: its context is its base model's
                parent = next((c for c in cards if c.get("id") == card["parent"]), {})
                card = {**card, "max_model_len": parent.get("max_model_len")}
            self.model = card["id"]
            self._model_card = card
            return card

    # -- tokens -----------------------------------------------------------------------------------
    def count_tokens(self, messages: list[dict]) -> int:
        if self.tokenizer is None:
            raise PolicyError(
                f"openai policy for {self.base_url} has no tokenizer: pass tokenizer=DIR (the served model's "
                "own tokenizer) to count tokens; without it only the server's context errors are seen"
            )
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # -- generation -------------------------------------------------------------------------------
    def generate(
        self,
        messages_batch: list[list[dict]],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None = None,
        top_p: float = 1.0,
    ) -> list[Generation]:
        """One request per conversation, `concurrency` at a time. Conversation i gets seed + i so a
        group of identical prompts still yields distinct samples. The first failure is raised."""
        self._resolve_model()

        def one(index: int) -> Generation:
            body = {"model": self.model, "messages": messages_batch[index], "max_tokens": int(max_tokens),
                    "temperature": float(temperature), "top_p": float(top_p)}
            if seed is not None:
                body["seed"] = int(seed) + index
            return self._parse_completion(self._request("POST", "/chat/completions", json=body),
                                          messages_batch[index])

        if len(messages_batch) == 1:
            return [one(0)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(messages_batch))) as pool:
            return list(pool.map(one, range(len(messages_batch))))

    def _parse_completion(self, data: Any, messages: list[dict]) -> Generation:
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise PolicyError(f"{self.base_url}/chat/completions: unexpected response "
                              f"{redact(repr(data)[:500], self.api_key_env)}") from None
        usage = data.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens")
        if prompt_tokens is None:
            prompt_tokens = self.count_tokens(messages) if self.tokenizer else 0
        if completion_tokens is None:
            completion_tokens = len(self.tokenizer(text)["input_ids"]) if self.tokenizer else 0
        return Generation(text=text, finish_reason=choice.get("finish_reason") or "stop",
                          prompt_tokens=int(prompt_tokens), completion_tokens=int(completion_tokens))

    # -- HTTP -------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, json: dict | None = None, retries: int | None = None,
                 timeout_s: float | None = None) -> Any:
        """The decoded JSON answer; the SDK retries transient failures `retries` times (default max_retries)."""
        url = self.base_url + path
        retries = self.max_retries if retries is None else retries
        options: dict[str, Any] = {"max_retries": retries, "api_key": os.environ.get(self.api_key_env) or "unset"}
        if timeout_s is not None:
            options["timeout"] = timeout_s
        client = self._client.with_options(**options)
        try:
            if method == "GET":
                return client.get(path, cast_to=object)
            return client.post(path, body=json, cast_to=object)
        except openai.APIStatusError as error:
            detail = redact(error.response.text[:1000], self.api_key_env)
            status = error.status_code
            if status in (400, 413) and CONTEXT_ERROR.search(detail):
                match = CONTEXT_LIMIT.search(detail)
                raise ContextLengthExceeded(f"{url}: {detail}", limit=int(match[1]) if match else None) from None
            attempts = retries + 1 if status in RETRY_STATUS else 1
            raise PolicyError(f"{method} {url} failed after {attempts} attempts: HTTP {status}: {detail}") from None
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error
            reason = redact(f"{type(cause).__name__}: {cause}", self.api_key_env)
            raise PolicyError(f"{method} {url} failed after {retries + 1} attempts: {reason}") from None

    def close(self) -> None:
        self._client.close()

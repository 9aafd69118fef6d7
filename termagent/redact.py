"""Keep secrets out of messages: `redact(text, "OPENAI_API_KEY")` replaces the value of each named
environment variable with ***. Servers may echo what they were sent (an Authorization header, the key);
every error text from an HTTP endpoint goes through here before it is raised or logged."""

from __future__ import annotations

import os


def redact(text: str, *env_names: str) -> str:
    for name in env_names:
        value = os.environ.get(name)
        if value:
            text = text.replace(value, "***")
    return text

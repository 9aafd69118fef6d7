"""One chat template for training and evaluation (docs/design.md#principles, docs/templates.md).

    project_template(template) -> str      the project's template for the family `template` belongs to
    install_template(tokenizer)            tokenizer.chat_template = project_template(tokenizer.chat_template)

Every path renders with the template `install_template` leaves on the tokenizer: the base_model stage writes it
into models/base, and SFT, DPO, GRPO, MT-GRPO's token buffer, the in-process policy and the servers (which read
models/base's tokenizer) all render with it. It is written here, in our own words, for three families:

- **Qwen3** (the stock Qwen3 template and its variants; Nemotron-Terminal-8B): thinking off in every rendering.
  Every assistant turn, history included, is `<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n` + content +
  `<|im_end|>\\n` — exactly what the generation prompt opens and the model then writes. The stock template drops
  a history turn's think block once a later user turn exists; this one never rewrites the past, so a conversation
  only grows by appending (MT-GRPO's token buffer needs that) and SFT trains the very ids the eval sends.
- **ChatML** (SmolLM2-135M-Instruct, Qwen2.5): the model's own tokens, a default system prompt included when
  its template inserts one (a conversation without a system message gets it, as the model was tuned with it).
- **the tiny model's** (`TINY_TEMPLATE` below, which termagent.models.tiny installs): already the Qwen3 shape
  with markers; kept as is.

`{% generation %}` ... `{% endgeneration %}` mark what the model writes (content + `<|im_end|>`), for TRL's
assistant-only loss. The family is found by rendering the given template on probe conversations, and the result
is checked to render the same text as the given template wherever the two are meant to agree (the first
prompt, a final assistant turn; for ChatML whole multi-turn conversations): a template that looks like a family
but renders differently is refused, not silently replaced.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
EMPTY_THINK = "<think>\n\n</think>\n\n"
# The first line of every template this module writes: a template carrying it (and generation markers) is
# already the project's and is kept as it is (models/base's, read again by a later stage).
HEADER = "{#- termagent project chat template (termagent/models/templates.py): one rendering for training and evaluation -#}\n"

_GENERATION = re.compile(r"{%-?\s*generation\s*-?%}")
_USER, _ASSISTANT, _SYSTEM = "\x01user-probe\x01", "\x01assistant-probe\x01", "\x01system-probe\x01"


# The tiny test model's template (termagent.models.tiny writes it): Qwen3's non-thinking shape with markers.
TINY_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}"
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}"
    "{%- generation %}{{- content + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
)


class TemplateError(ValueError):
    pass


def has_generation_markers(template: str | None) -> bool:
    return bool(template) and bool(_GENERATION.search(template))


def _literal(text: str) -> str:
    """`text` as a Jinja string literal (JSON's escapes are Jinja's)."""
    return json.dumps(text)


def _template(default_system: str, think: bool) -> str:
    """The project's template: ChatML turns, the assistant's content and `<|im_end|>` in generation markers,
    `default_system` (rendered text) first when the conversation has no system message, and with `think` the
    empty think block that opens every assistant turn and the generation prompt (Qwen3, thinking off)."""
    opening = _literal(f"{IM_START}assistant\n" + (EMPTY_THINK if think else ""))
    default = (f"{{%- if messages and messages[0].role != 'system' %}}{{{{- {_literal(default_system)} }}}}{{%- endif %}}\n"
               if default_system else "")
    return (
        HEADER
        + default
        + "{%- for message in messages %}\n"
        "{%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}\n"
        "{%- if message.role == 'assistant' %}\n"
        f"{{{{- {opening} }}}}"
        "{%- generation %}{{- content + '<|im_end|>' }}{%- endgeneration %}{{- '\\n' }}\n"
        "{%- elif message.role == 'system' or message.role == 'user' %}\n"
        "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}\n"
        "{%- else %}\n"
        "{{- raise_exception('the project chat template renders system, user and assistant messages, not ' + message.role) }}\n"
        "{%- endif %}\n"
        "{%- endfor %}\n"
        f"{{%- if add_generation_prompt %}}{{{{- {opening} }}}}{{%- endif %}}\n"
    )


def _render(template: str, messages: list[dict], *, add_generation_prompt: bool = False) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([messages], chat_template=template, add_generation_prompt=add_generation_prompt,
                                        enable_thinking=False, bos_token="", eos_token=IM_END)
    return rendered[0]


def _describe(template: str) -> str:
    head = " ".join(template.split())[:120]
    return f"a template of {len(template)} characters beginning {head!r}"


def _unknown(template: str, why: str) -> TemplateError:
    return TemplateError(
        f"chat template: {_describe(template)} is not of a family the project renders ({why}). The project "
        "supports the Qwen3 family (thinking off), plain ChatML (e.g. SmolLM2) and the tiny model's template. For "
        "another model, write a template with {% generation %} ... {% endgeneration %} around what the assistant "
        "writes, render every turn so that a conversation only grows by appending, and set "
        "base_model.chat_template_path to that .jinja (docs/templates.md)")


def project_template(template: str) -> str:
    """The ONE chat template every path renders with, for the family of `template` (a model's own template, TRL's
    training variant of it, or a template this function already returned). Raises TemplateError (a ValueError)
    naming what was found when the family is unknown or the rendering would not match the model's own."""
    if not isinstance(template, str) or not template.strip():
        raise TemplateError("chat template: the tokenizer has none; set base_model.chat_template_path to a .jinja "
                            "with {% generation %} markers (docs/templates.md)")
    if template == TINY_TEMPLATE or (template.startswith(HEADER) and has_generation_markers(template)):
        return template
    if IM_START not in template:
        raise _unknown(template, f"no {IM_START} turns")
    try:
        prompt = _render(template, [{"role": "user", "content": _USER}], add_generation_prompt=True)
    except Exception as error:  # noqa: BLE001 (a template that cannot render the probe is not one we know)
        raise _unknown(template, f"rendering a user message failed: {type(error).__name__}: {error}") from None
    default_system, user_turn, rest = prompt.partition(f"{IM_START}user\n{_USER}{IM_END}\n")
    if not user_turn:
        raise _unknown(template, "a user message is not rendered as a ChatML turn")
    if rest == f"{IM_START}assistant\n{EMPTY_THINK}":
        think = True
    elif rest == f"{IM_START}assistant\n":
        think = False
    else:
        raise _unknown(template, f"its generation prompt (thinking off) is {rest!r}")
    ours = _template(default_system, think)
    _check_same(template, ours, multi_turn=not think)
    return ours


def _check_same(theirs: str, ours: str, *, multi_turn: bool) -> None:
    """Our template renders what the model's own renders where they are meant to agree: the first prompt (with
    and without a system message) and a final assistant turn; for ChatML (multi_turn) whole conversations."""
    system = [{"role": "system", "content": _SYSTEM}]
    user, assistant = {"role": "user", "content": _USER}, {"role": "assistant", "content": _ASSISTANT}
    probes = [([user], True), ([*system, user], True), ([user, assistant], False), ([*system, user, assistant], False)]
    if multi_turn:
        probes += [([user, assistant, user], True), ([*system, user, assistant, user, assistant], False)]
    for messages, generation_prompt in probes:
        expected = _render(theirs, messages, add_generation_prompt=generation_prompt)
        got = _render(ours, messages, add_generation_prompt=generation_prompt)
        if got != expected:
            roles = ", ".join(m["role"] for m in messages) + (" + generation prompt" if generation_prompt else "")
            raise _unknown(theirs, f"it renders [{roles}] as {expected!r}, the project template as {got!r}")


def install_template(tokenizer, chat_template_path: str | Path | None = None) -> None:
    """Set `tokenizer.chat_template` to the project's template for its family (idempotent). With
    `chat_template_path` (base_model.chat_template_path): that file's template, which must carry
    `{% generation %}` markers, is installed as the project's (the header line added)."""
    if chat_template_path:
        path = Path(chat_template_path)
        if not path.is_file():
            raise TemplateError(f"base_model.chat_template_path: {path} is not a file")
        text = path.read_text(encoding="utf-8")
        if not has_generation_markers(text):
            raise TemplateError(f"base_model.chat_template_path: {path} has no {{% generation %}} markers; TRL's "
                                "assistant-only loss needs them around what the assistant writes")
        tokenizer.chat_template = text if text.startswith(HEADER) else HEADER + text
        return
    tokenizer.chat_template = project_template(tokenizer.chat_template)


def template_sha256(template: str | None) -> str:
    import hashlib

    return hashlib.sha256((template or "").encode()).hexdigest()

"""Chat templates rendered as transformers 5 renders them (utils/chat_template_utils.py):
the same sandboxed jinja environment, filters and globals, and the messages normalized the same
way, so that a prompt built without transformers is the prompt transformers would build."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _plain(value: Any) -> Any:
    """transformers' ``_plain_template_data``: only JSON-like data reaches the sandbox."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    for base in (str, int, float):
        if isinstance(value, base):
            return base(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value) if isinstance(value, tuple) \
            else [_plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return _plain(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _messages(chat: Sequence[Any]) -> list[dict[str, Any]]:
    """Messages as the template sees them: None values dropped (transformers'
    ``_normalize_chat_messages``) and the reasoning under all of its names."""
    out = []
    for message in _plain(list(chat)):
        if not isinstance(message, dict):
            raise TypeError(f"Chat messages should be dicts, but got {message!r}.")
        message = {k: v for k, v in message.items() if v is not None}
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None),
                         None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def render_chat(template: str, chat: Sequence[Any], tools: list[dict[str, Any]] | None,
                documents: list[dict[str, Any]] | None, add_generation_prompt: bool,
                variables: dict[str, Any]) -> str:
    """One conversation rendered with ``template``; ``variables``: the special tokens and
    any extra keyword the caller passed, as transformers hands them to the template."""
    if tools is not None and not all(isinstance(t, dict) for t in tools):
        raise NotImplementedError("tools given as functions need transformers")
    if documents is not None and not all(isinstance(d, dict) for d in documents):
        raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")
    rendered: str = _compiled(template).render(
        messages=_messages(chat), tools=_plain(tools), documents=_plain(documents),
        add_generation_prompt=add_generation_prompt, **_plain(variables))
    return rendered


class _TemplateDict:
    """The templates' ``dict(...)``, without the dict class's attributes."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


@lru_cache
def _compiled(template: str) -> Any:
    """transformers' jinja environment (``_cached_compile_jinja_template``); its
    ``{% generation %}`` tag only marks assistant text, so here it renders its body."""
    import jinja2
    import jinja2.ext
    import jinja2.utils
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}  # noqa: RUF012 (jinja's own declaration)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body
                                          ).set_lineno(lineno)

        def _body(self, caller: Callable[[], str]) -> str:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    class TemplateNamespace(jinja2.utils.Namespace):  # no dunder attributes stored
        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                TemplateNamespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name: object) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    "Chat templates cannot store underscore-prefixed attributes on a namespace, "
                    f"but got {name!r}. Please rename the attribute.")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env.from_string(template)

"""A small POSIX-shell reader: enough to find the engine command in a container's `sh -c` script.

Real P/D manifests start engines through scripts (`sh -c "python3 -m vllm... \\ --port 8000"`, or
`bash -c "cd /workspace && ./prefill.sh"` with the script mounted from a ConfigMap). This module
splits such scripts into simple commands with shell quoting rules (single quotes are literal,
double quotes expand `$VAR`/`${VAR}`, backslash-newline continues a line, `#` starts a comment),
tracks `export`/assignments and `cd`, and follows `./script.sh` / `bash script.sh` into files the
caller supplies. Pipelines, loops and command substitution are not evaluated.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_SHELLS = {"sh", "bash", "dash", "ash", "zsh"}
_OPERATORS = ("&&", "||", ";", "\n", "|", "&")


class ShellError(Exception):
    """The script cannot be run as written; str() is the line the shell would print."""


@dataclass
class ShellState:
    env: dict[str, str]
    cwd: str = "/"
    files: Mapping[str, str] = field(default_factory=dict)
    shell: str = "sh"
    depth: int = 0


def _expand(text: str, env: Mapping[str, str]) -> str:
    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        default = match.group(2)
        value = env.get(name, "")
        if not value and default is not None:
            return default
        return value

    return _VAR.sub(repl, text)


def _split_commands(script: str) -> list[list[list[tuple[str, str]]]]:
    """Words as lists of (quote, text) segments, grouped into commands split at operators."""
    commands: list[list[list[tuple[str, str]]]] = []
    words: list[list[tuple[str, str]]] = []
    segments: list[tuple[str, str]] = []
    buf: list[str] = []
    i = 0
    n = len(script)

    def end_segment(kind: str = "") -> None:
        if buf:
            segments.append((kind, "".join(buf)))
            buf.clear()

    def end_word() -> None:
        end_segment()
        if segments:
            words.append(list(segments))
            segments.clear()

    def end_command() -> None:
        end_word()
        if words:
            commands.append(list(words))
            words.clear()

    while i < n:
        ch = script[i]
        if ch == "\\" and i + 1 < n:
            if script[i + 1] == "\n":
                i += 2
                continue
            end_segment()
            segments.append(("'", script[i + 1]))
            i += 2
            continue
        if ch == "'":
            end_segment()
            close = script.find("'", i + 1)
            if close < 0:
                raise ShellError("sh: unexpected EOF while looking for matching `''")
            segments.append(("'", script[i + 1 : close]))
            i = close + 1
            continue
        if ch == '"':
            end_segment()
            j = i + 1
            text: list[str] = []
            while j < n and script[j] != '"':
                if script[j] == "\\" and j + 1 < n and script[j + 1] in '"\\$`\n':
                    if script[j + 1] != "\n":
                        text.append(script[j + 1])
                    j += 2
                    continue
                text.append(script[j])
                j += 1
            if j >= n:
                raise ShellError("sh: unexpected EOF while looking for matching `\"'")
            segments.append(('"', "".join(text)))
            i = j + 1
            continue
        if ch == "#" and not buf and not segments:
            newline = script.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if ch in " \t":
            end_word()
            i += 1
            continue
        matched = next((op for op in _OPERATORS if script.startswith(op, i)), None)
        if matched:
            end_command()
            i += len(matched)
            continue
        buf.append(ch)
        i += 1
    end_command()
    return commands


def _expand_word(segments: list[tuple[str, str]], env: Mapping[str, str]) -> str:
    return "".join(text if kind == "'" else _expand(text, env) for kind, text in segments)


TargetFn = Callable[[list[str]], bool]


def find_command(script: str, state: ShellState, is_target: TargetFn) -> list[str] | None:
    """Walk the script in order; return the argv of the first command `is_target` accepts, else None."""
    for raw in _split_commands(script):
        argv = [_expand_word(word, state.env) for word in raw]
        while argv and _ASSIGN.match(argv[0]):
            name, value = argv.pop(0).split("=", 1)
            state.env[name] = value
        if not argv:
            continue
        head = argv[0]
        if head == "export":
            for item in argv[1:]:
                if _ASSIGN.match(item):
                    name, value = item.split("=", 1)
                    state.env[name] = value
            continue
        if head == "cd":
            target = argv[1] if len(argv) > 1 else "/root"
            state.cwd = posixpath.normpath(posixpath.join(state.cwd, target))
            continue
        if head in {"exec", "nohup", "env", "time"}:
            argv = argv[1:]
            while argv and _ASSIGN.match(argv[0]):
                argv.pop(0)
            if not argv:
                continue
        if is_target(argv):
            return argv
        found = _follow(argv, state, is_target)
        if found is not None:
            return found
    return None


def _nested_script(argv: list[str], state: ShellState) -> str | None:
    """The path of a script this command runs (`./x.sh`, `bash x.sh`, `source x.sh`), if any."""
    head = posixpath.basename(argv[0])
    if head in _SHELLS or argv[0] in {"source", "."}:
        if len(argv) > 1 and argv[1] == "-c":
            return None
        rest = [a for a in argv[1:] if not a.startswith("-")]
        return rest[0] if rest else None
    if "/" in argv[0] or argv[0].endswith(".sh"):
        return argv[0]
    return None


def _follow(argv: list[str], state: ShellState, is_target: TargetFn) -> list[str] | None:
    head = posixpath.basename(argv[0])
    if head in _SHELLS and len(argv) > 2 and argv[1] == "-c":
        return find_command(argv[2], state, is_target)
    path = _nested_script(argv, state)
    if path is None:
        return None
    full = posixpath.normpath(posixpath.join(state.cwd, path))
    content = state.files.get(full)
    if content is None:
        raise ShellError(f"{state.shell}: line 1: {path}: No such file or directory")
    if state.depth > 8:
        raise ShellError(f"{state.shell}: {path}: maximum script nesting exceeded")
    state.depth += 1
    try:
        return find_command(content, state, is_target)
    finally:
        state.depth -= 1

"""The docs name only commands, flags and variables that exist.

Every ``kuberaven …`` invocation in the code of docs/*.md and README.md (code
blocks and inline code) names a command of the CLI (its click tree, the one
``--help`` prints) and only that command's flags; every ``--flag`` that
stands alone in inline code is a flag of some kuberaven command; every
``KUBERAVEN_*`` variable is a setting's or one of settings.NOT_SETTINGS.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from kuberaven.cli import app
from kuberaven.node_settings import NODE
from kuberaven.settings import NOT_SETTINGS, setting_names, variable

ROOT = Path(__file__).parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
# Flags that stand alone in the docs and are other programs': the program that has each.
OTHERS_FLAGS = {
    "--hostname-override": "kubelet",
    "--from-literal": "kubectl create secret",
    "--no-defaults": "mariadbd",
    "--skip-networking": "mariadbd",
    "--require-all": "pytest (tests/conftest.py)",
    "--proxy-mode": "kube-proxy",
    "--conntrack-max-per-core": "kube-proxy",
}
# benchmarks.md's lone flags are those of bench/*.py scripts, not kuberaven's.
LONE_FLAGS_ARE_OTHERS = {"benchmarks.md"}

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
# `kuberaven` where a shell would run it: first on the line or span (after a prompt, a path or variables set
# for it), or after a separator; the rest of the line is its words.
INVOCATION = re.compile(r"(?:^|[|;&]\s*|\$\s+|\$\(|bin/|^(?:[A-Z_]+=\S+\s+)+)kuberaven((?:\s+\S+)*)")
SEPARATORS = {"|", "||", "&&", ";", ">", "2>&1", "\\"}
FLAG = re.compile(r"-[a-zA-Z]$|--[a-z][\w-]*")
LONE_FLAG = re.compile(r"(--[a-z][\w-]*)(?:/(--[a-z][\w-]*))?(?:[ =].*)?")
VARIABLE = re.compile(r"(?<!unknown environment variable )\bKUBERAVEN_[A-Z0-9_]*[A-Z0-9]")


@dataclass(frozen=True)
class Code:
    doc: str
    line: int
    text: str
    inline: bool


def code_in(doc: str, text: str) -> Iterator[Code]:
    """The code of a markdown text: each line of its fenced blocks (``\\`` continuations joined) and each span."""
    for block in FENCE.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        for offset, line in enumerate(block.group(1).replace("\\\n", " ").splitlines()):
            yield Code(doc, first + offset, line, inline=False)
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for span in SPAN.finditer(prose):
        yield Code(doc, prose.count("\n", 0, span.start()) + 1, span.group(1), inline=True)


def _walk(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))


def cli_flags() -> dict[tuple[str, ...], set[str]]:
    """Each command's path (() for `kuberaven` itself) and its flags, --help included, as `--help` shows them."""
    found: dict[tuple[str, ...], set[str]] = {}
    for path, command in _walk(app, ()):
        params = command.get_params(click.Context(command))
        found[path] = {o for p in params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
    return found


def _words(rest: str) -> list[str]:
    words = []
    for word in rest.split():
        if word in SEPARATORS or word.startswith("#"):
            break
        word = word.strip("\"'`,[]")
        words.append(word.rstrip(")"))
        if word.endswith(")"):  # the end of a $( … )
            break
    return words


def invocation_problems(code: Code, flags: dict[tuple[str, ...], set[str]]) -> Iterator[str]:
    """What is wrong with each `kuberaven …` in ``code``: a command that does not exist, or a flag it lacks."""
    for match in INVOCATION.finditer(code.text):
        words = _words(match.group(1))
        path: tuple[str, ...] = ()
        while words and (*path, words[0]) in flags:
            path = (*path, words.pop(0))
        command = _command(path)
        where = f"{code.doc}:{code.line}: `kuberaven{match.group(1)}`"
        if isinstance(command, click.Group) and words and not words[0].startswith("-"):
            # `kuberaven get/apply/delete` names several commands: each must be one
            absent = [name for name in words[0].split("/") if (*path, name) not in flags]
            yield from (f"{where}: no command {' '.join(['kuberaven', *path, name])}" for name in absent)
            continue
        for word in words:
            flag = word.split("=")[0]
            if FLAG.fullmatch(flag) and flag not in flags[path]:
                yield f"{where}: {' '.join(['kuberaven', *path])} has no {flag}"


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = app
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def lone_flag_problems(code: Code, known: set[str]) -> Iterator[str]:
    """A flag alone in inline code (`--leader-elect`, `--db URL`) that no kuberaven command has."""
    match = LONE_FLAG.fullmatch(code.text.strip())
    if not code.inline or match is None or code.doc in LONE_FLAGS_ARE_OTHERS:
        return
    for flag in filter(None, match.groups()):
        if flag not in known and flag not in OTHERS_FLAGS:
            yield f"{code.doc}:{code.line}: `{code.text}`: no kuberaven command has {flag}"


def problems_in(doc: str, text: str) -> list[str]:
    flags = cli_flags()
    known = set().union(*flags.values())
    found: list[str] = []
    for code in code_in(doc, text):
        found += invocation_problems(code, flags)
        found += lone_flag_problems(code, known)
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_kuberaven_command_and_flag_the_docs_name_exists(doc: Path) -> None:
    problems = problems_in(doc.name, doc.read_text())
    assert not problems, "\n".join(problems)


def test_the_docs_invocations_are_seen() -> None:
    """The check reads what it should: known invocations of the docs are among those it parses."""
    seen = {
        (code.doc, m.group(0).strip())
        for doc in DOCS
        for code in code_in(doc.name, doc.read_text())
        for m in INVOCATION.finditer(code.text)
    }
    assert ("configuration.md", "kuberaven run") in {(d, " ".join(t.split()[:2])) for d, t in seen}
    assert any(d == "operations.md" and "--leader-elect" in t for d, t in seen)
    assert any(d == "README.md" and "testenv env" in t for d, t in seen)
    assert len(seen) > 40


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("run it: `kuberaven run --leader-elect --shutdown-timeout 5`", "kuberaven run has no --shutdown-timeout"),
        ("```\n$ kuberaven testenv up --dir d --made-up\n```\n", "kuberaven testenv up has no --made-up"),
        ('`eval "$(kuberaven testenv envs)"`', "no command kuberaven testenv envs"),
        ("| `--made-up` | |", "no kuberaven command has --made-up"),
    ],
)
def test_a_made_up_command_or_flag_is_named(text: str, expected: str) -> None:
    problems = problems_in("made-up.md", text)
    assert len(problems) == 1 and expected in problems[0], problems


def test_every_kuberaven_variable_the_docs_name_is_a_setting_or_read_elsewhere() -> None:
    known = {variable(name) for name in setting_names()} | NOT_SETTINGS | NODE.variables()
    known.add(NODE.env_prefix.rstrip("_"))  # KUBERAVEN_NODE_<NAME>, KUBERAVEN_NODE_*: the agent's as a family
    unknown = [f"{doc.name}: {name}" for doc in DOCS for name in VARIABLE.findall(doc.read_text()) if name not in known]
    assert not unknown, "\n".join(unknown)

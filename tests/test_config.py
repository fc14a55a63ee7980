"""Tests for gitpub.config: defaults, every error case, the template, and the glob matcher."""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitpub.config import model as config_model
from gitpub.config.load import default_config_text, load_config, parse_config
from gitpub.config.model import (
    ChannelSpec,
    Command,
    Config,
    DeliverySpec,
    FontSpec,
    LiveCheck,
    Rate,
    RetryPolicy,
    SiteSpec,
    default_node,
)
from gitpub.config.schema import yaml_keys
from gitpub.core.errors import CONFIG_FILE, ConfigError, UsageError

NODE_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def error_for(text: str, source: str = CONFIG_FILE) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source)
    return info.value


# -- defaults -------------------------------------------------------------------------------------


def test_defaults() -> None:
    config = Config()
    assert config.remote == "origin"
    assert config.branch == "main"
    assert config.articles == ("content/**/*.md", "posts/**/*.md", "_posts/**/*.md")
    assert config.fonts == ()
    assert config.trailer_prefix == "Blog"
    assert NODE_RE.fullmatch(config.node) and ".." not in config.node
    assert config.node == default_node()
    assert config.retry == RetryPolicy(5, 30.0, 3600.0, 0.2)
    assert config.draft is None
    assert config.judge is None
    assert config.gates == ()
    assert config.content == ()


@pytest.mark.parametrize(
    "text", ["", "\n\n", "# only a comment\n", "# one\n\n  # two\n", "---\n", "~\n", "---\n# c\n"]
)
def test_empty_or_comment_only_file_means_defaults(text: str) -> None:
    assert parse_config(text) == Config()


def test_null_sections_mean_defaults() -> None:
    text = "fonts:\ngates:\ncontent:\nretry:\ndraft:\njudge: ~\n"
    assert parse_config(text) == Config()


@pytest.mark.parametrize(
    ("host", "node"),
    [
        ("laptop", "laptop"),
        ("build-1.example.com", "build-1.example.com"),
        ("my host!", "my-host"),
        ("-weird..name_", "weird.name"),
        ("émile's mac", "mile-s-mac"),
        ("...", "node"),
        ("", "node"),
    ],
)
def test_node_sanitizing(host: str, node: str) -> None:
    assert config_model.sanitize_node(host) == node


def test_config_is_frozen_and_hashable() -> None:
    config = Config(node="n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.remote = "upstream"  # type: ignore[misc]
    assert hash(config) == hash(Config(node="n"))


def test_config_built_by_hand_coerces_lists_and_checks_globs() -> None:
    config = Config(articles=["a/*.md"], content=["b/**"], node="n")  # type: ignore[arg-type]
    assert config.articles == ("a/*.md",)
    assert config.content == ("b/**",)
    assert config.is_article("a/x.md") and config.is_content("b/c/d")
    with pytest.raises(ValueError, match="unterminated"):
        Config(articles=("a/[x",), node="n")
    with pytest.raises(ValueError, match="relative"):
        Config(content=("/etc/*",), node="n")


# -- the template ---------------------------------------------------------------------------------


def test_template_parses_to_the_defaults() -> None:
    parsed = parse_config(default_config_text())
    assert dataclasses.replace(parsed, node="x") == dataclasses.replace(Config(), node="x")
    assert parsed == Config()  # node is commented out, so it is the default too


def test_template_mentions_every_key_and_protocol() -> None:
    text = default_config_text()
    for key in (*yaml_keys(Config), *yaml_keys(RetryPolicy), *yaml_keys(ChannelSpec),
                *yaml_keys(SiteSpec), *yaml_keys(LiveCheck), *yaml_keys(DeliverySpec)):
        assert re.search(rf"^(# )?\s*{key}:", text, re.MULTILINE), key
    for word in ("GITPUB_SOURCE", "GITPUB_OUTPUT", "GITPUB_TARGETS", "GITPUB_FILES"):
        assert word in text
    for word in ("SKIP", "KEEP", "REVIEW", "sh -c", "timeout"):
        assert word in text


def _template_examples(text: str) -> dict[str, str]:
    """The commented-out examples: a '# key:' line and the '#   ...' lines indented under it."""
    examples: dict[str, str] = {}
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"# (\w+):", line)
        if match and match.group(1) in yaml_keys(Config):
            block = [line[2:]]
            for follow in lines[index + 1 :]:
                if not follow.startswith("#   "):
                    break
                block.append(follow[2:])
            examples[match.group(1)] = "\n".join(block) + "\n"
    return examples


def test_template_examples_are_valid() -> None:
    examples = _template_examples(default_config_text())
    assert set(examples) == {"content", "publish", "fonts", "node", "draft", "judge", "gates",
                             "site", "channels", "delivery"}
    parsed = {key: parse_config(example) for key, example in examples.items()
              if key != "channels"}  # channels need site.url: parsed together below
    assert parsed["node"].node == "build-server-1"
    assert parsed["draft"].draft == Command("draft", ("python3", "tools/draft.py"), 600.0)
    assert parsed["judge"].judge == Command("judge", ("sh", "-c", "tools/judge.sh"), 120.0)
    assert [gate.name for gate in parsed["gates"].gates] == ["front-matter", "spelling"]
    assert parsed["fonts"].fonts[0].output == "static/fonts/serif.woff2"
    assert parsed["content"].is_content("static/css/site.css")
    assert parsed["site"].site.live is not None
    site = examples["site"]
    channels = parse_config(site + examples["channels"]).channels
    assert [(c.name, c.kind, c.required) for c in channels] == [
        ("mastodon", "command", True), ("cdn-purge", "webhook", False)]
    assert channels[0].rate == Rate(10, 3600.0)
    assert parsed["delivery"].delivery == DeliverySpec(
        mode="pull_request", forge="github", repository="example/blog", token_env="GITHUB_TOKEN")


def test_publish_is_the_write_scope() -> None:
    assert parse_config("publish:\n").publish is None  # null: the default
    config = parse_config('publish: ["posts/agent/**", ".github/CODEOWNERS"]\n')
    assert config.publish == ("posts/agent/**", ".github/CODEOWNERS")
    assert config.scope_problem("posts/agent/x.md") is None
    assert config.scope_problem(".github/CODEOWNERS") is None  # named exactly
    assert config.scope_problem(".github/workflows/x.yml") is not None
    assert config.scope_problem("posts/x.md") is not None
    assert Config().publish_globs == Config().articles
    assert Config(content=("static/**",), node="n").scope_problem("static/a.css") is None


# -- a full file ----------------------------------------------------------------------------------

FULL = """
remote: upstream
branch: site/live
articles: ["blog/**/*.md", "notes/*.txt"]
content: ["static/**", "about.md"]
fonts:
  - source: fonts/Serif.ttc
    face: 2
    output: static/fonts/serif.woff2
    text: ["blog/**/*.md"]
  - {source: fonts/Sans.OTF, output: static/sans.ttf, text: ["about.md"]}
trailer_prefix: My-Site2
node: box_1.lan
retry: {max_attempts: 2, backoff_base: 1.5, backoff_max: 60, jitter: 0}
draft: tools/draft.sh "$GITPUB_SOURCE"
judge: {run: [python3, judge.py, --strict], timeout: 5}
gates:
  - name: lint
    run: make lint
  - name: links
    run: [tools/links, ""]
    timeout: 7.5
"""


def test_full_file() -> None:
    config = parse_config(FULL)
    assert config.remote == "upstream"
    assert config.branch == "site/live"
    assert config.articles == ("blog/**/*.md", "notes/*.txt")
    assert config.content == ("static/**", "about.md")
    assert config.fonts == (
        FontSpec("fonts/Serif.ttc", "static/fonts/serif.woff2", ("blog/**/*.md",), 2),
        FontSpec("fonts/Sans.OTF", "static/sans.ttf", ("about.md",), 0),
    )
    assert config.trailer_prefix == "My-Site2"
    assert config.node == "box_1.lan"
    assert config.retry == RetryPolicy(2, 1.5, 60.0, 0.0)
    assert isinstance(config.retry.backoff_max, float)
    assert config.draft == Command("draft", ("sh", "-c", 'tools/draft.sh "$GITPUB_SOURCE"'), 600.0)
    assert config.judge == Command("judge", ("python3", "judge.py", "--strict"), 5.0)
    assert config.gates == (
        Command("lint", ("sh", "-c", "make lint"), 120.0),
        Command("links", ("tools/links", ""), 7.5),
    )
    assert config.is_content("static/fonts/serif.woff2")
    assert config.is_content("static/sans.ttf")
    assert config.is_content("about.md")
    assert config.is_content("blog/2024/a.md")
    assert not config.is_content("fonts/Serif.ttc")
    assert not config.is_article("about.md")


def test_partial_retry_keeps_other_defaults() -> None:
    assert parse_config("retry: {jitter: 1}").retry == RetryPolicy(5, 30.0, 3600.0, 1.0)
    assert parse_config("retry: {max_attempts: 1}").retry.max_attempts == 1


def test_lease_seconds() -> None:
    assert parse_config("").lease_seconds == 900.0
    assert parse_config("lease_seconds: 2.5").lease_seconds == 2.5
    for bad in ("0", "-1", "soon", "[1]"):
        with pytest.raises(UsageError, match="lease_seconds"):
            parse_config(f"lease_seconds: {bad}")


def test_archive_after_and_confirm_unrecorded() -> None:
    default = parse_config("")
    assert (default.archive_after, default.confirm_unrecorded) == (64, "bad")
    config = parse_config("archive_after: 0\nconfirm_unrecorded: report\n")
    assert (config.archive_after, config.confirm_unrecorded) == (0, "report")
    for key, bad in (("archive_after", "-1"), ("archive_after", "1.5"),
                     ("archive_after", "true"), ("confirm_unrecorded", "ok"),
                     ("confirm_unrecorded", "[bad]")):
        with pytest.raises(UsageError, match=key):
            parse_config(f"{key}: {bad}")


def test_multiline_shell_command() -> None:
    config = parse_config("draft: |\n  set -e\n  make draft\n")
    assert config.draft == Command("draft", ("sh", "-c", "set -e\nmake draft\n"), 600.0)


# -- errors ---------------------------------------------------------------------------------------

# (file text, key path the message must name, a fragment of the message)
ERRORS: list[tuple[str, str, str]] = [
    # top level
    ("- a\n- b\n", "", "expected a mapping of keys at the top level, got ['a', 'b']"),
    ("just a string\n", "", "expected a mapping of keys at the top level"),
    ("remot: x\n", "remot", "unknown key"),
    ("1: x\n", "", "keys must be strings, got 1"),
    ("on: x\n", "", "keys must be strings, got True"),
    # remote and branch
    ("remote: 5\n", "remote", "expected a string, got 5"),
    ("remote: ''\n", "remote", "expected a non-empty string, got ''"),
    ("remote: '-upload-pack=x'\n", "remote", "must not start with '-'"),
    ('remote: "a\\nb"\n', "remote", "must be one line"),
    ("remote: ' origin'\n", "remote", "without surrounding spaces"),
    ("branch: no\n", "branch", "expected a string, got False"),
    ("branch: refs/heads/main\n", "branch", "not a ref"),
    ("branch: a..b\n", "branch", "not a valid git branch name"),
    ("branch: 'a b'\n", "branch", "must not contain spaces"),
    ("branch: 'a~1'\n", "branch", "must not contain spaces"),
    ("branch: a/\n", "branch", "not a valid git branch name"),
    ("branch: x.lock\n", "branch", "not a valid git branch name"),
    ("branch: a/.b\n", "branch", "not a valid git branch name"),
    ("branch: '@'\n", "branch", "not a valid git branch name"),
    ("branch: '-x'\n", "branch", "must not start with '-'"),
    # articles and content
    ("articles: posts/*.md\n", "articles", "expected a list of glob strings, got 'posts/*.md'"),
    ("articles: []\n", "articles", "expected at least one glob, got []"),
    ("articles:\n", "articles", "expected a list of glob strings, got None"),
    ("articles: [5]\n", "articles[0]", "expected a glob string, got 5"),
    ("articles: ['']\n", "articles[0]", "expected a non-empty path"),
    ("articles: ['/abs/*.md']\n", "articles[0]", "must be relative to the repository root"),
    ("articles: ['a/../*.md']\n", "articles[0]", "must not contain '..' components"),
    ("articles: ['..']\n", "articles[0]", "must not contain '..' components"),
    ("articles: ['a\\\\*.md']\n", "articles[0]", "must not contain backslashes"),
    ("articles: ['./a/*.md']\n", "articles[0]", "must not contain empty or '.' components"),
    ("articles: ['a//b']\n", "articles[0]", "must not contain empty or '.' components"),
    ("articles: ['.git/**']\n", "articles[0]", "must not point into .git"),
    ("articles: ['a/.GIT/x']\n", "articles[0]", "must not point into .git"),
    ('articles: ["a\\tb"]\n', "articles[0]", "control characters"),
    ("articles: ['a/[bc.md']\n", "articles[0]", "unterminated character class"),
    ("articles: ['a/[]']\n", "articles[0]", "unterminated character class"),
    ("articles: ['a/[z-a].md']\n", "articles[0]", "out of order"),
    ("content: static/**\n", "content", "expected a list of glob strings"),
    ("content: ['static/']\n", "content[0]", "must not contain empty or '.' components"),
    ("content: [{a: 1}]\n", "content[0]", "expected a glob string"),
    # the write scope
    ("publish: []\n", "publish", "expected at least one glob, got []"),
    ("publish: 'posts/**'\n", "publish", "expected a list of glob strings"),
    ("publish: ['../x/**']\n", "publish[0]", "'..'"),
    ("publish: ['.git/hooks/*']\n", "publish[0]", ".git"),
    ("publish: [5]\n", "publish[0]", "expected a glob string"),
    # fonts
    ("fonts: {source: a.ttf}\n", "fonts", "expected a list of fonts"),
    ("fonts: [a.ttf]\n", "fonts[0]", "expected a mapping with 'source', 'output' and 'text'"),
    ("fonts: [{output: o.woff2, text: ['*']}]\n", "fonts[0].source", "required key is missing"),
    ("fonts: [{source: s.ttf, text: ['*']}]\n", "fonts[0].output", "required key is missing"),
    ("fonts: [{source: s.ttf, output: o.woff2}]\n", "fonts[0].text", "required key is missing"),
    (
        "fonts: [{source: s.ttf, output: o.woff2, text: ['*'], size: 3}]\n",
        "fonts[0].size",
        "unknown key",
    ),
    ("fonts: [{source: s.woff, output: o.woff2, text: ['*']}]\n", "fonts[0].source", ".ttc"),
    ("fonts: [{source: s.ttf, output: o.otf, text: ['*']}]\n", "fonts[0].output", ".woff2"),
    ("fonts: [{source: /s.ttf, output: o.woff2, text: ['*']}]\n", "fonts[0].source", "relative"),
    ("fonts: [{source: s.ttf, output: ../o.woff2, text: ['*']}]\n", "fonts[0].output", "'..'"),
    ("fonts: [{source: s.ttf, output: .git/o.ttf, text: ['*']}]\n", "fonts[0].output", ".git"),
    ("fonts: [{source: s.ttf, output: 'GIT~1/o.ttf', text: ['*']}]\n", "fonts[0].output", ".git"),
    ("fonts: [{source: s.ttf, output: 'a:b.ttf', text: ['*']}]\n", "fonts[0].output", "Windows"),
    ("fonts: [{source: 's\\\\a.ttf', output: o.ttf, text: ['*']}]\n", "fonts[0].source", "back"),
    ("fonts: [{source: 5, output: o.ttf, text: ['*']}]\n", "fonts[0].source", "a string, got 5"),
    ("fonts: [{source: s.ttf, output: s.ttf, text: ['*']}]\n", "fonts[0].output", "must differ"),
    ("fonts: [{source: s.ttf, output: o.ttf, text: []}]\n", "fonts[0].text", "at least one"),
    ("fonts: [{source: s.ttf, output: o.ttf, text: '*.md'}]\n", "fonts[0].text", "a list"),
    ("fonts: [{source: s.ttf, output: o.ttf, text: ['/x']}]\n", "fonts[0].text[0]", "relative"),
    (
        "fonts: [{source: s.ttf, output: o.ttf, text: ['*'], face: 1}]\n",
        "fonts[0].face",
        "only a .ttc collection",
    ),
    (
        "fonts: [{source: s.ttc, output: o.ttf, text: ['*'], face: -1}]\n",
        "fonts[0].face",
        "expected an integer >= 0, got -1",
    ),
    (
        "fonts: [{source: s.ttc, output: o.ttf, text: ['*'], face: true}]\n",
        "fonts[0].face",
        "expected an integer >= 0, got True",
    ),
    (
        "fonts:\n"
        "  - {source: a.ttf, output: o.woff2, text: ['*']}\n"
        "  - {source: b.ttf, output: o.woff2, text: ['*']}\n",
        "fonts[1].output",
        "same output as fonts[0]",
    ),
    # trailer_prefix and node
    ("trailer_prefix: My_Blog\n", "trailer_prefix", "expected a git trailer token"),
    ("trailer_prefix: 'My Blog'\n", "trailer_prefix", "expected a git trailer token"),
    ("trailer_prefix: 1Blog\n", "trailer_prefix", "expected a git trailer token"),
    ("trailer_prefix: ''\n", "trailer_prefix", "expected a non-empty string"),
    ("trailer_prefix: 7\n", "trailer_prefix", "expected a string, got 7"),
    ("node: 'my host'\n", "node", "got 'my host'"),
    ("node: -x\n", "node", "starting and ending with a letter or digit"),
    ("node: a..b\n", "node", "without '..'"),
    ("node: a/b\n", "node", "got 'a/b'"),
    ("node: 42\n", "node", "expected a string, got 42"),
    # retry
    ("retry: 3\n", "retry", "expected a mapping, got 3"),
    ("retry: {max_attempt: 3}\n", "retry.max_attempt", "unknown key"),
    ("retry:\n  max_attempts: three\n", "retry.max_attempts", "expected an integer >= 1"),
    ("retry: {max_attempts: 0}\n", "retry.max_attempts", "expected an integer >= 1, got 0"),
    ("retry: {max_attempts: 2.0}\n", "retry.max_attempts", "expected an integer >= 1, got 2.0"),
    ("retry: {max_attempts: true}\n", "retry.max_attempts", "expected an integer >= 1, got True"),
    ("retry: {backoff_base: 0}\n", "retry.backoff_base", "expected a number of seconds > 0"),
    ("retry: {backoff_base: -1}\n", "retry.backoff_base", "got -1"),
    ("retry: {backoff_base: '30'}\n", "retry.backoff_base", "got '30'"),
    ("retry: {backoff_base: .nan}\n", "retry.backoff_base", "got nan"),
    ("retry: {backoff_max: .inf}\n", "retry.backoff_max", "got inf"),
    ("retry: {backoff_max: 1" + "0" * 400 + "}\n", "retry.backoff_max", "got 1000"),
    ("retry: {backoff_max: 10}\n", "retry.backoff_max", "must be >= retry.backoff_base (30)"),
    ("retry: {jitter: 1.5}\n", "retry.jitter", "expected a number between 0 and 1, got 1.5"),
    ("retry: {jitter: -0.1}\n", "retry.jitter", "got -0.1"),
    ("retry: {jitter: false}\n", "retry.jitter", "got False"),
    # draft and judge
    ("draft: ''\n", "draft", "expected a non-empty command"),
    ("draft: '   '\n", "draft", "expected a non-empty command"),
    ("draft: []\n", "draft", "expected a non-empty command, got []"),
    ("draft: ['', x]\n", "draft[0]", "expected a program name"),
    ("draft: [python3, 3]\n", "draft[1]", "expected a string, got 3"),
    ("draft: 5\n", "draft", "expected a command"),
    ("draft: true\n", "draft", "expected a command"),
    ("draft: {timeout: 5}\n", "draft.run", "required key is missing"),
    ("draft: {rn: x}\n", "draft.rn", "unknown key"),
    ("draft: {run: {run: x}}\n", "draft.run", "expected a command"),
    ("draft: {run: x, timeout: 0}\n", "draft.timeout", "expected a number of seconds > 0, got 0"),
    ("draft: {run: x, timeout: ten}\n", "draft.timeout", "got 'ten'"),
    ("draft: {run: x, timeout: true}\n", "draft.timeout", "got True"),
    ('draft: "a\\0b"\n', "draft", "NUL"),
    ("judge: [x, [y]]\n", "judge[1]", "expected a string, got ['y']"),
    ("judge: {run: '', timeout: 5}\n", "judge.run", "expected a non-empty command"),
    # gates
    ("gates: make lint\n", "gates", "expected a list of gates"),
    ("gates: ['make lint']\n", "gates[0]", "expected a mapping with 'name' and 'run'"),
    ("gates: [{run: x}]\n", "gates[0].name", "required key is missing"),
    ("gates: [{name: a}]\n", "gates[0].run", "required key is missing"),
    ("gates: [{name: a, run: x, cmd: y}]\n", "gates[0].cmd", "unknown key"),
    ("gates: [{name: '', run: x}]\n", "gates[0].name", "expected a non-empty string"),
    ("gates: [{name: 3, run: x}]\n", "gates[0].name", "expected a string, got 3"),
    ("gates: [{name: a, run: ''}]\n", "gates[0].run", "expected a non-empty command"),
    ("gates: [{name: a, run: [sleep, 5]}]\n", "gates[0].run[1]", "expected a string, got 5"),
    ("gates: [{name: a, run: x, timeout: -5}]\n", "gates[0].timeout", "got -5"),
    ("gates: [{name: a, run: x}, {name: a, run: y}]\n", "gates[1].name", "duplicate gate name"),
    # delivery (through review: docs/review.md)
    ("delivery: {mode: merge}\n", "delivery.mode", "merge"),
    ("delivery: {forge: github}\n", "delivery.forge", "only with mode: pull_request"),
    ("delivery: {mode: pull_request}\n", "delivery.forge", "required with mode: pull_request"),
    ("delivery: {mode: pull_request, forge: github}\n", "delivery.repository",
     "required with forge: github"),
    ("delivery: {mode: pull_request, forge: gitea, repository: a/b}\n", "delivery.api",
     "required with forge: gitea"),
    ("delivery: {mode: pull_request, forge: branch, repository: a/b}\n",
     "delivery.repository", "not a key of forge: branch"),
    ("delivery: {mode: pull_request, forge: github, repository: a/b, compare_url: "
     "'https://x/{base}...{head}'}\n", "delivery.compare_url", "not a key of forge: github"),
    ("delivery: {mode: pull_request, forge: github, repository: '../x'}\n",
     "delivery.repository", "expected a repository path"),
    ("delivery: {mode: pull_request, forge: github, repository: a/b, token_env: 'ghp_x y'}\n",
     "delivery.token_env", "expected the name of an environment variable"),
    ("delivery: {mode: pull_request, forge: branch, branch_prefix: 'a..b/'}\n",
     "delivery.branch_prefix", "expected the start of a branch name"),
    ("delivery: {mode: pull_request, forge: branch, compare_url: 'https://x/{nope}'}\n",
     "delivery.compare_url", "unknown field {nope}"),
    ("delivery: {mode: pull_request, forge: branch, checks_per_run: 0}\n",
     "delivery.checks_per_run", "0"),
    ("delivery: {mode: pull_request, forge: github, repository: a/b, api: 'ftp://x'}\n",
     "delivery.api", "http"),
]


@pytest.mark.parametrize(("text", "key", "fragment"), ERRORS)
def test_errors_name_file_and_key(text: str, key: str, fragment: str) -> None:
    error = error_for(text)
    message = str(error)
    prefix = f"{CONFIG_FILE}: {key}: " if key else f"{CONFIG_FILE}: "
    assert message.startswith(prefix), message
    assert fragment in message, message
    assert error.source == CONFIG_FILE
    assert error.key == (key or None)
    assert error.message == message


def test_error_message_format() -> None:
    error = error_for("retry:\n  max_attempts: three\n")
    assert str(error) == (".gitpub.yaml: retry.max_attempts: expected an integer >= 1, got 'three'")


def test_error_uses_the_given_source_name() -> None:
    error = error_for("retry: {jitter: 2}\n", source="site/.gitpub.yaml")
    assert str(error).startswith("site/.gitpub.yaml: retry.jitter: ")
    error = error_for("a: [\n", source="other.yaml")
    assert str(error).startswith("other.yaml: line ")


def test_config_error_is_a_usage_error_with_hint() -> None:
    error = error_for("remot: x\n")
    assert isinstance(error, UsageError)
    assert error.exit_code == UsageError.exit_code
    assert error.hint == "did you mean 'remote'?"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("remot: x\n", "did you mean 'remote'?"),
        ("Branch: x\n", "did you mean 'branch'?"),
        ("trailer-prefix: X\n", "did you mean 'trailer_prefix'?"),
        ("retry: {maxattempts: 2}\n", "did you mean 'max_attempts'?"),
        ("max_attempts: 3\n", "did you mean 'retry.max_attempts'?"),
        ("gates: [{name: a, rnu: x}]\n", "did you mean 'run'?"),
        ("fonts: [{sorce: a.ttf}]\n", "did you mean 'source'?"),
        ("zzz: 1\n", "known keys: remote, branch,"),
    ],
)
def test_unknown_key_hints(text: str, hint: str) -> None:
    error = error_for(text)
    assert error.hint is not None and error.hint.startswith(hint), error.hint


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("branch: no\n", "put the value in quotes"),
        ("remote: 1.5\n", "put the value in quotes"),
        ("yes: x\n", "quote the key"),
        ("articles: posts/*.md\n", "write a list: articles: ['posts/*.md']"),
        ("articles: ['/posts/*.md']\n", "drop the leading '/': 'posts/*.md'"),
        ("articles: ['./posts/*.md']\n", "write 'posts/*.md'"),
        ("content: ['static/']\n", "to mean everything below a directory write 'static/**'"),
        ("branch: refs/heads/live\n", "write 'live'"),
        ("trailer_prefix: My_Blog\n", "e.g. 'Blog' or 'My-Site'"),
        ("node: 'my host'\n", "e.g. 'my-host'"),
        ("a: 1\na: 2\n", "a key may appear only once"),
        ("fonts: [{source: /usr/share/fonts/truetype/wqy/wqy-microhei.ttc, "
         "output: static/f.woff2, text: ['posts/**']}]\n",
         "the font source must be a file in the repository, committed: copy it in "
         "(e.g. fonts/wqy-microhei.ttc)"),
        ("fonts: [{source: fonts/a.ttf, output: /var/www/f.woff2, text: ['posts/**']}]\n",
         "write a path inside the repository, relative to its root (e.g. static/fonts/f.woff2)"),
    ],
)
def test_other_hints(text: str, hint: str) -> None:
    error = error_for(text)
    assert error.hint is not None and hint in error.hint, error.hint


def test_long_values_are_cut_short_in_messages() -> None:
    message = str(error_for(f"remote: [{', '.join(['x' * 20] * 20)}]\n"))
    assert "..." in message
    assert len(message) < 120


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("remote: origin\nbranch: [main\n", 3),
        ("remote: origin\n\tbranch: main\n", 2),
        ("remote: origin\n  branch: main\n", 2),
        ("a: b: c\n", 1),
        ("remote: 'unterminated\n", 2),
        ("remote: !!python/object/apply:os.system ['true']\n", 1),
        ("remote: origin\nbranch: x\nremote: other\n", 3),
        ("retry:\n  jitter: 0.1\n  jitter: 0.2\n", 3),
    ],
)
def test_yaml_errors_give_the_line(text: str, line: int) -> None:
    message = str(error_for(text))
    assert message.startswith(f"{CONFIG_FILE}: line {line}, column "), message
    assert "invalid YAML" in message


def test_duplicate_key_names_the_key() -> None:
    assert "found duplicate key 'remote'" in str(error_for("remote: a\nremote: b\n"))


def test_yaml_merge_keys_are_not_duplicates() -> None:
    text = "gates:\n  - &g {name: a, run: make}\n  - {<<: *g, name: b}\n"
    config = parse_config(text)
    assert [gate.name for gate in config.gates] == ["a", "b"]


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_aliases_that_expand_too_far_are_refused_before_expansion() -> None:
    error = error_for(billion_laughs())
    assert "expands to more than 100000 values (through its aliases)" in str(error)
    assert error.hint


def test_a_self_referring_alias_is_refused() -> None:
    assert "an alias refers to the node that contains it" in str(error_for("a: &x [1, *x]\n"))


def test_deep_nesting_is_a_clear_error() -> None:
    text = "a: " + "[" * 5000 + "]" * 5000 + "\n"
    assert "invalid YAML" in str(error_for(text))


def test_billion_laughs_in_a_repository_is_a_usage_error_in_bounded_memory(
        tmp_path: Path) -> None:
    """It used to take `git pub status` to 3 GB before a MemoryError."""
    root = Path(__file__).resolve().parent.parent
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / CONFIG_FILE).write_text(billion_laughs(), encoding="utf-8")
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
    code = limit + "import sys; from gitpub.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, "-C", str(repo), "status"],
                          capture_output=True, timeout=60, env={**os.environ,
                                                                "PYTHONPATH": str(root)})
    assert proc.returncode == 2, proc.stderr
    assert b".gitpub.yaml: the document expands to more than" in proc.stderr


# -- load_config ----------------------------------------------------------------------------------


def test_load_config_without_file_gives_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()


def test_load_config_reads_the_file(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text("remote: upstream\n", encoding="utf-8")
    assert load_config(tmp_path).remote == "upstream"


def test_load_config_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_bytes(b"\xef\xbb\xbfbranch: live\n")
    assert load_config(tmp_path).branch == "live"


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_text("retry: {max_attempts: three}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^\.gitpub\.yaml: retry\.max_attempts: "):
        load_config(tmp_path)


def test_load_config_refuses_bad_utf8(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).write_bytes(b"remote: \xff\n")
    with pytest.raises(ConfigError, match=r"^\.gitpub\.yaml: not valid UTF-8"):
        load_config(tmp_path)


def test_load_config_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE).mkdir()
    with pytest.raises(ConfigError, match=r"^\.gitpub\.yaml: cannot read"):
        load_config(tmp_path)


# -- globs ----------------------------------------------------------------------------------------


def matches(glob: str, path: str) -> bool:
    return Config(articles=(glob,), node="n").is_article(path)


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("posts/**/*.md", "posts/a.md", True),
        ("posts/**/*.md", "posts/2024/x/a.md", True),
        ("posts/**/*.md", "posts/2024/a.md", True),
        ("posts/**/*.md", "posts.md", False),
        ("posts/**/*.md", "other/posts/a.md", False),
        ("posts/**/*.md", "posts/a.mdx", False),
        ("posts/**/*.md", "posts/a/b", False),
        ("posts/**/*.md", "posts/.md", True),
        ("posts/*.md", "posts/a.md", True),
        ("posts/*.md", "posts/x/a.md", False),
        ("*.md", "a.md", True),
        ("*.md", "dir/a.md", False),
        ("**/*.md", "a.md", True),
        ("**/*.md", "a/b/c.md", True),
        ("**", "a", True),
        ("**", "a/b/c", True),
        ("static/**", "static/a", True),
        ("static/**", "static/a/b.css", True),
        ("static/**", "static", False),
        ("static/**", "staticx/a", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/xb", False),
        ("a/**/**/b", "a/b", True),
        ("a/**b", "a/xb", True),  # '**' inside a component is '*'
        ("a/**b", "a/x/b", False),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("a?c", "ac", False),
        ("[ab].md", "b.md", True),
        ("[ab].md", "c.md", False),
        ("[!ab].md", "c.md", True),
        ("x[!a]y", "x/y", False),  # not even a negated class matches '/'
        ("x*y", "x/y", False),
        ("[^ab].md", "a.md", False),
        ("[a-c]x", "bx", True),
        ("[a-c]x", "dx", False),
        ("[]]x", "]x", True),
        ("[!]]x", "]x", False),
        ("[!]]x", "ax", True),
        ("x[-a]", "x-", True),
        ("x[a-]", "x-", True),
        ("[*]", "*", True),
        ("[*]", "a", False),
        ("[?]", "a", False),
        ("a.md", "a.md", True),
        ("a.md", "aXmd", False),  # '.' is literal
        ("a+(b)$.md", "a+(b)$.md", True),  # regex characters are literal
        ("Posts/*.md", "posts/a.md", False),  # case-sensitive
        ("*", ".hidden", True),  # like gitignore, '*' matches a leading dot
        ("*/a", "/a", False),
    ],
)
def test_glob_semantics(glob: str, path: str, expected: bool) -> None:
    assert matches(glob, path) is expected


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/posts/a.md",
        "posts//a.md",
        "posts/./a.md",
        "posts/../posts/a.md",
        "./posts/a.md",
        "posts/a.md/",
        "posts\\a.md",
        "posts/a\n.md",
        ".git/posts/a.md",
        "posts/.git/a.md",
    ],
)
def test_unclean_paths_are_never_articles_or_content(path: str) -> None:
    config = Config(articles=("**",), content=("**",), node="n")
    assert not config.is_article(path)
    assert not config.is_content(path)


def test_default_article_globs() -> None:
    config = Config()
    assert config.is_article("content/a.md")
    assert config.is_article("content/blog/2024/a.md")
    assert config.is_article("_posts/2024-01-01-x.md")
    assert not config.is_article("README.md")
    assert not config.is_article("content/a.html")
    assert not config.is_content("static/a.css")


def test_is_content_covers_articles_fonts_and_content_globs() -> None:
    font = FontSpec("fonts/a.ttf", "static/a.woff2", ("**/*.md",))
    config = Config(fonts=(font,), content=("static/css/*.css",), node="n")
    assert config.is_content("posts/a.md")
    assert config.is_content("static/a.woff2")
    assert config.is_content("static/css/site.css")
    assert not config.is_content("static/b.woff2")
    assert not config.is_content("fonts/a.ttf")
    assert not config.is_article("static/a.woff2")


# A brute-force reference: split into components, '**' tries every number of directories,
# every other component is matched by fnmatch (which agrees with us within one component).


def reference_match(glob: str, path: str) -> bool:
    pattern, parts = glob.split("/"), path.split("/")

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(parts)
        if pattern[i] == "**":
            if i == len(pattern) - 1:
                return j < len(parts)  # a trailing '**' needs something below
            return any(match(i + 1, k) for k in range(j, len(parts) + 1))
        return j < len(parts) and fnmatch.fnmatchcase(parts[j], pattern[i]) and match(i + 1, j + 1)

    return match(0, 0)


_TOKENS = st.sampled_from(["a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-b]", "[.b]", "**"])
_NOT_DOTS = lambda part: part not in (".", "..")  # noqa: E731
_GLOB_PART = st.one_of(
    st.just("**"), st.lists(_TOKENS, min_size=1, max_size=4).map("".join).filter(_NOT_DOTS)
)
_GLOBS = st.lists(_GLOB_PART, min_size=1, max_size=4).map("/".join)
_PATH_PART = st.text(alphabet="ab.", min_size=1, max_size=3).filter(_NOT_DOTS)
_PATHS = st.lists(_PATH_PART, min_size=1, max_size=5).map("/".join)


@settings(max_examples=400, deadline=None)
@given(glob=_GLOBS, path=_PATHS)
def test_glob_matches_the_reference(glob: str, path: str) -> None:
    assert matches(glob, path) == reference_match(glob, path)

"""The rules of the ``delivery`` section of ``.gitpub.yaml`` (see ``schema``): how a job's
commit reaches the branch, pushed or through a pull/merge request (docs/review.md).

A mixin of ``schema.Parser``, as ``channel_rules`` is: each method is a rule a field's
``check`` names, and ``delivery`` adds what no single key can say (which keys each mode and
forge takes, and which it needs).
"""

from __future__ import annotations

import re
import string
from urllib.parse import urlsplit

from gitpub.config.model import DeliverySpec
from gitpub.config.rules import Parser, join
from gitpub.core.globs import shown

_REPOSITORY_RE = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PREFIX_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_COMPARE_FIELDS = ("base", "head")
#: The keys only ``mode: pull_request`` takes, and those only an API forge takes.
_REVIEW_KEYS = ("forge", "repository", "api", "token_env", "branch_prefix", "compare_url",
                "timeout", "checks_per_run")
_API_KEYS = ("repository", "api", "token_env")




class DeliveryRules:
    def delivery(self: Parser, value: object, key: str) -> DeliverySpec:
        if value is None:
            return DeliverySpec()
        given = self.section(DeliverySpec, value, key)
        spec = DeliverySpec(**given)
        if not spec.reviewed:
            for name in _REVIEW_KEYS:
                if name in given:
                    self.fail(join(key, name), "only with mode: pull_request",
                              "set `mode: pull_request` to deliver through a pull/merge "
                              "request, or drop the key")
            return spec
        if spec.forge is None:
            self.fail(join(key, "forge"), "required with mode: pull_request",
                      "github, gitlab, gitea, or branch (no API: the review branch is pushed "
                      "and a compare URL printed)")
        if spec.forge == "branch":
            for name in _API_KEYS:
                if name in given:
                    self.fail(join(key, name), "not a key of forge: branch (it has no API)")
            return spec
        if spec.repository is None:
            self.fail(join(key, "repository"), f"required with forge: {spec.forge}",
                      "the repository's name on the forge, like 'owner/site' (GitLab: the "
                      "project's path, 'group/subgroup/site')")
        if spec.forge == "gitea" and spec.api is None:
            self.fail(join(key, "api"), "required with forge: gitea",
                      "the API's address, like 'https://gitea.example.org/api/v1'")
        if "compare_url" in given:
            self.fail(join(key, "compare_url"), f"not a key of forge: {spec.forge} (its API "
                      "gives the request's address)")
        return spec

    def forge_repository(self: Parser, value: object, key: str) -> str:
        text = self.name(value, key)
        if not _REPOSITORY_RE.fullmatch(text) or ".." in text:
            self.fail(key, f"expected a repository path like 'owner/site', got {shown(text)}")
        return text

    def env_name(self: Parser, value: object, key: str) -> str:
        text = self.name(value, key)
        if not _ENV_NAME_RE.fullmatch(text):
            self.fail(key, "expected the name of an environment variable (letters, digits and "
                      f"'_'), got {shown(text)}",
                      "the token itself never goes into .gitpub.yaml: only the variable's name")
        return text

    def branch_prefix(self: Parser, value: object, key: str) -> str:
        text = self.name(value, key)
        bad = not _PREFIX_RE.fullmatch(text) or any(
            s in text for s in ("..", "//", "/.", ".lock/", "@{")) or text.endswith(".")
        if bad:
            self.fail(key, f"expected the start of a branch name, like 'gitpub/', got "
                      f"{shown(text)}")
        return text

    def compare_template(self: Parser, value: object, key: str) -> str:
        template = self.name(value, key)
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
        except ValueError as error:
            self.fail(key, f"invalid template {shown(template)}: {error}")
        for name in names:
            if name not in _COMPARE_FIELDS:
                self.fail(key, f"unknown field {{{name}}} in {shown(template)}",
                          "fields: {base} (the configured branch), {head} (the review branch)")
        parts = urlsplit(template)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.expected(key, "an http:// or https:// URL template", value)
        return template

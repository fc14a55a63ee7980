"""The frozen payload: what every channel announces, built once, after the blog commit is
confirmed, and stored in the job's tree (``payload.json``).

Every send and every retry of every channel of the job sends exactly these bytes, and each
channel record carries their SHA-256 (checked before each send): a retry never rebuilds the
announcement, so the text cannot drift between two attempts under one idempotency key.

The payload is canonical JSON (sorted keys, no spaces, UTF-8)::

    {"article_sha256", "format": 1, "job_id", "manifest_sha256", "media": [absolute URLs],
     "operation": "create", "path", "remote_commit", "summary", "title", "url"}

``url`` is the article's canonical URL: ``site.url`` joined with the ``site.path`` template.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Any
from urllib.parse import quote, urljoin

from gitpub.channels.model import FORMAT_VERSION, OPERATION_CREATE
from gitpub.config.model import Config, SiteSpec
from gitpub.core.record import JobRecord
from gitpub.core.sanitize import sanitize
from gitpub.pipeline import frontmatter
from gitpub.pipeline.frontmatter import title_of

SUMMARY_LIMIT = 280
_IMAGE_RE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
                       r"|<img\s[^>]*\bsrc=[\"']([^\"']+)[\"']", re.IGNORECASE)


def article_path(config: Config, record: JobRecord) -> str | None:
    """The job's article (the first target that is one), or None: nothing to announce."""
    return next((p for p in sorted(record.target_paths) if config.is_article(p)), None)


def _meta(text: str) -> dict[str, Any]:
    """The front matter's mapping (YAML, TOML or JSON), empty when there is none."""
    fm = frontmatter.split(text)
    if fm is None:
        return {}
    data, _problem = frontmatter.parse(fm)
    return dict(data) if data else {}


def canonical_url(site: SiteSpec, path: str, meta: dict[str, Any]) -> str:
    assert site.url is not None, "the schema requires site.url with channels"
    name = posixpath.basename(path)
    stem = name.rsplit(".", 1)[0] if "." in name else name
    slug = meta.get("slug")
    fields = {"path": path, "dir": posixpath.dirname(path), "name": name, "stem": stem,
              "slug": slug if isinstance(slug, str) and slug.strip() else stem}
    rendered = site.path.format(**fields)
    if not rendered.startswith("/"):
        rendered = "/" + rendered
    return site.url.rstrip("/") + quote(rendered, safe="/%:@!$&'()*+,;=~-._")


def _body(text: str) -> str:
    """The Markdown text after its front matter."""
    fm = frontmatter.split(text)
    return text if fm is None else fm.body


def summary_of(text: str, meta: dict[str, Any]) -> str:
    """Front matter ``summary``/``description``/``excerpt``, else the first paragraph."""
    for key in ("summary", "description", "excerpt"):
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return _clip(" ".join(value.split()))
    for paragraph in re.split(r"\n\s*\n", _body(text)):
        lines = [ln.strip() for ln in paragraph.strip().splitlines()]
        if not lines or lines[0].startswith(("#", "![", "<", "```", "|", ">")):
            continue
        return _clip(" ".join(" ".join(lines).split()))
    return ""


def _clip(text: str) -> str:
    return text if len(text) <= SUMMARY_LIMIT else text[:SUMMARY_LIMIT - 1].rstrip() + "…"


def media_of(text: str, meta: dict[str, Any], page_url: str) -> list[str]:
    """Images the article shows (cover first), as absolute URLs, each once."""
    found: list[str] = []
    for key in ("image", "cover"):
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            found.append(value.strip())
    found += [m.group(1) or m.group(2) for m in _IMAGE_RE.finditer(_body(text))]
    seen: dict[str, None] = {}
    for ref in found:
        seen.setdefault(urljoin(page_url, ref), None)
    return list(seen)


def build_payload(config: Config, record: JobRecord, path: str, data: bytes) -> bytes:
    """The canonical bytes of the job's payload (sanitized: they are stored and sent)."""
    text = data.decode("utf-8", "replace")
    meta = _meta(text)
    url = canonical_url(config.site, path, meta)
    payload = {
        "format": FORMAT_VERSION,
        "job_id": record.job_id,
        "operation": OPERATION_CREATE,
        "url": url,
        "title": sanitize(title_of(path, data) or posixpath.basename(path)),
        "summary": sanitize(summary_of(text, meta)),
        "media": [sanitize(m) for m in media_of(text, meta, url)],
        "path": path,
        "article_sha256": hashlib.sha256(data).hexdigest(),
        "manifest_sha256": record.manifest_sha256,
        "remote_commit": record.remote_commit,
    }
    return canonical_json(payload)


def canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def payload_sha256(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def parse_payload(raw: bytes) -> dict[str, Any]:
    """The stored payload, checked to be what ``build_payload`` writes (canonical bytes)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"payload.json is not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        raise ValueError("payload.json is not a version 1 payload")
    if canonical_json(data) != raw:
        raise ValueError("payload.json is not in canonical form")
    for key in ("url", "title", "job_id"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"payload.json has no {key}")
    return data

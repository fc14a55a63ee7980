from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gitpub.pipeline.frontmatter import _plain_title
from gitpub.pipeline.frontmatter import problem as front_matter_problem
from gitpub.pipeline.gates import title_of


@pytest.mark.parametrize("line", ["title: Hello", 'title: "Quoted: x"', "title: 你好 世界",
                                  "title: 'single'", "title: with-dash and.dots"])
def test_plain_titles_read_as_yaml_does(line: str) -> None:
    assert _plain_title(line) == yaml.safe_load(line)["title"]


@pytest.mark.parametrize("line", ["title: 'it''s'", "title: a: b", "title: [x]",
                                  "title: x # comment", "title: |", 'title: "a\\"b"'])
def test_anything_subtle_is_left_to_yaml(line: str) -> None:
    assert _plain_title(line) is None


@given(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30))
def test_plain_title_agrees_with_yaml_whenever_it_answers(value: str) -> None:
    line = f"title: {value}"
    plain = _plain_title(line)
    if plain is None:
        return
    try:
        parsed = yaml.safe_load(line)
    except yaml.YAMLError:
        return  # not valid YAML: front_matter_problem rejects it before any commit
    if isinstance(parsed, dict) and isinstance(parsed.get("title"), str):
        assert plain == parsed["title"]


def test_title_falls_back_to_the_first_heading() -> None:
    assert title_of("posts/a.md", b"# Heading\n\ntext\n") == "Heading"
    assert title_of("posts/a.md", b"---\ntitle: [1, 2]\n---\n# H\n") == "H"
    assert front_matter_problem("---\ntitle: x\n") is not None

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gitpub.config.load import StrictLoader
from gitpub.pipeline.frontmatter import problem as front_matter_problem
from gitpub.pipeline.gates import title_of


@pytest.mark.parametrize("line", ["title: Hello", 'title: "Quoted: x"', "title: 你好 世界",
                                  "title: 'single'", "title: with-dash and.dots",
                                  "title: 'it''s'", "title: x # comment", 'title: "a\\"b"'])
def test_titles_read_as_yaml_does(line: str) -> None:
    assert title_of("posts/a.md", f"---\n{line}\n---\n".encode()) == yaml.safe_load(line)["title"]


@given(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30))
def test_a_title_line_agrees_with_yaml(value: str) -> None:
    line = f"title: {value}"
    try:
        parsed = yaml.load(line, StrictLoader)
    except yaml.YAMLError:
        assert front_matter_problem(f"---\n{line}\n---\n") is not None
        return
    found = title_of("posts/a.md", f"---\n{line}\n---\n# H\n".encode())
    value = parsed.get("title") if isinstance(parsed, dict) else None
    expected = " ".join(value.split()) if isinstance(value, str) else ""
    assert found == (expected or "H")


def test_title_falls_back_to_the_first_heading() -> None:
    assert title_of("posts/a.md", b"# Heading\n\ntext\n") == "Heading"
    assert title_of("posts/a.md", b"---\ntitle: [1, 2]\n---\n# H\n") == "H"
    assert front_matter_problem("---\ntitle: x\n") is not None

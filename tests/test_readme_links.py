"""The README's links point at files inside the repository (never at ../shared, which a clone lacks)."""
from __future__ import annotations

import re

from conftest import ROOT


def test_readme_links_resolve_inside_the_repository():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+://", t)]
    assert len(targets) >= 4 and "docs/definitions.md" in targets
    for t in targets:
        path = (ROOT / t).resolve()
        assert path.is_relative_to(ROOT.resolve()) and path.exists(), t
    assert "../shared/docs" not in text

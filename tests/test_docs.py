"""Every Python code block in README.md and docs/ runs (each file's blocks in order)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_pages_with_code_are_found() -> None:
    assert any(BLOCK.search(page.read_text()) for page in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(page.read_text())
    if not blocks:
        pytest.skip(f"{page.name} has no Python blocks")
    monkeypatch.chdir(tmp_path)  # runs write logs under the working directory
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for index, block in enumerate(blocks):
        code = compile(block, f"{page.name}[python block {index}]", "exec")
        exec(code, namespace)

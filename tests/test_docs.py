"""Every ```python block in README.md and docs/*.md runs (so the docs never rot)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCKS = [(f, i, code) for f in FILES
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", f.read_text(), re.S))]


@pytest.mark.parametrize("path, i, code", BLOCKS,
                         ids=[f"{f.name}:{i}" for f, i, _ in BLOCKS])
def test_block_runs(path, i, code, capsys):
    # (run as a script: a block guarded by `if __name__ == "__main__":` runs too)
    exec(compile(code, f"{path.name} block {i}", "exec"), {"__name__": "__main__"})

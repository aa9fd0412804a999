"""The code blocks of docs/distributions.md run."""

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "distributions.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_doc_block_runs(i, capsys):
    exec(compile(BLOCKS[i], f"{DOC.name} block {i}", "exec"), {})

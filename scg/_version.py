"""scg's version: from the installed package's metadata, else from pyproject.toml beside it."""

import pathlib
import re


def _version():
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("scg")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover - Python without importlib.metadata
        pass
    pyproject = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        text = pyproject.read_text()
    except OSError:
        return "unknown"
    # (the [project] table's version line; tomllib would do, a regular expression suffices)
    match = re.search(r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.M | re.S)
    return match.group(1) if match else "unknown"


__version__ = _version()

"""scg.jit knows scg's own code by its files, however scg was imported."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_gradient_replays_when_scg_is_imported_through_a_path_with_dots(tmp_path):
    """A script that puts "<its folder>/.." on sys.path (as benchmarks do) imports scg's
    files under names with "..": they are still scg's, so the gradient replays."""
    sub = tmp_path / "sub"
    sub.mkdir()
    relative = os.path.relpath(ROOT, sub)
    (sub / "run.py").write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), {relative!r}))
        import numpy as np
        import scg
        assert ".." in scg.__file__, scg.__file__
        f = scg.jit(scg.grad(lambda p: np.sum(np.tanh(p["a"] @ p["b"]))))
        p = {{"a": np.ones((3, 3)), "b": np.ones(3)}}
        for _ in range(5):
            f(p)
        print(f.stats["replays"])
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(sub / "run.py")], capture_output=True, text=True,
                         cwd=str(tmp_path), env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == 3

import numpy as np

import scg


def test_third_derivative_of_sin():
    assert np.isclose(scg.grad(scg.grad(scg.grad(np.sin)))(0.3), -np.cos(0.3))


def test_a_folder_named_scg_in_the_current_directory_does_not_shadow_the_package(tmp_path):
    # (an editable install used to put an import hook after the path search, so a folder
    # scg/ without __init__.py in the working directory became a namespace package "scg"
    # with none of scg's names; pyproject.toml's package-dir makes it a path entry)
    import subprocess
    import sys
    (tmp_path / "scg").mkdir()
    (tmp_path / "scg" / "notes.txt").write_text("a user's folder")
    out = subprocess.run([sys.executable, "-c", "import scg; print(scg.Pathwise.__name__)"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "Pathwise", out.stderr

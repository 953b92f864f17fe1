"""``connectx serve`` without its extra: one line naming what to install, as other commands do."""

from __future__ import annotations

import subprocess
import sys

# Flask made unimportable in a fresh interpreter (as when the serve extra is not installed).
WITHOUT_FLASK = """
import sys

sys.modules["flask"] = None
from connectx_gym.cli import main

sys.exit(main(["serve", "--port", "0"]))
"""


def test_serve_without_flask_says_which_extra_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_FLASK], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("connectx serve: error: the page needs Flask: ")
    assert 'pip install "connectx-gym[serve]"' in lines[0]
    assert "Traceback" not in done.stderr

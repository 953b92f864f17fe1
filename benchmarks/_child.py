"""The benchmarks' child processes (training runs, fresh interpreters): none outlives its script.

:func:`run` is :func:`subprocess.run` without ``check`` for such a child, with three guarantees:

- the child gets SIGTERM when the script ends, however it ends (a ``kill -9`` included; Linux's
  ``PR_SET_PDEATHSIG``): a ``connectx train`` child saves its checkpoint and stops;
- a SIGTERM to the script is passed on to the child, and the script waits for it to end;
- on Ctrl-C (which the child gets too, from the terminal) the script waits for the child to save
  and end, then raises ``KeyboardInterrupt``; a second Ctrl-C kills the child.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Sequence
from typing import Any

from connectx_gym.worker_pool import ends_with_this_process

__all__ = ["run"]


def run(command: Sequence[str], **popen: Any) -> subprocess.CompletedProcess[Any]:
    """Run ``command`` to its end (``popen``: :class:`subprocess.Popen`'s keywords, such as
    ``capture_output=True``, ``text``, ``cwd``, ``env``); its status, and its output when
    captured. Call it from the main thread."""
    if popen.pop("capture_output", False):
        popen["stdout"] = popen["stderr"] = subprocess.PIPE
    interrupted = False
    with subprocess.Popen(command, preexec_fn=ends_with_this_process(), **popen) as child:
        passed_on = signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
        try:
            while True:
                try:
                    stdout, stderr = child.communicate()
                    break
                except KeyboardInterrupt:
                    if interrupted:  # the second Ctrl-C: no more waiting
                        child.kill()
                    interrupted = True
        finally:
            signal.signal(signal.SIGTERM, passed_on)
    if interrupted:
        raise KeyboardInterrupt
    return subprocess.CompletedProcess(list(command), child.returncode, stdout, stderr)

"""Signal dispositions for test subprocesses that the tests interrupt."""

from __future__ import annotations

import signal


def default_signal_dispositions() -> None:
    """Run in the child before exec: a shell's background job (``pytest ... &``) ignores SIGINT,
    and an ignored signal stays ignored across exec, so the child would never see our Ctrl-C."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)

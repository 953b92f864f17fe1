"""A progress bar on stderr: tqdm when it is installed (the train extra), else a plain counter.

The core never requires tqdm: :class:`Progress` imports it only when enabled, and falls back to
rewriting one ``what done/total`` line at most a few times a second.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

__all__ = ["Progress"]


class Progress:
    """Counts ``total`` units of ``what`` on ``stream`` (stderr); a no-op unless ``enabled``.

    ``use_tqdm=False`` forces the plain counter. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        total: int,
        what: str,
        enabled: bool = True,
        stream: IO[str] | None = None,
        use_tqdm: bool = True,
        interval: float = 0.25,
    ) -> None:
        self.total, self.what, self.done = total, what, 0
        self.enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._interval, self._last = interval, 0.0
        self._bar: Any = None
        if enabled and use_tqdm:
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._bar = tqdm(total=total, desc=what, unit="", file=self._stream, leave=False)

    def update(self, count: int = 1) -> None:
        """``count`` more units are done."""
        self.done += count
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(count)
            return
        now = time.monotonic()
        if self.done >= self.total or now - self._last >= self._interval:
            self._last = now
            self._stream.write(f"\r{self.what} {self.done}/{self.total}")
            self._stream.flush()

    def close(self) -> None:
        """End the bar (its line is cleared by tqdm, ended by the counter)."""
        if not self.enabled:
            return
        self.enabled = False
        if self._bar is not None:
            self._bar.close()
        elif self._last:
            self._stream.write("\n")
            self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

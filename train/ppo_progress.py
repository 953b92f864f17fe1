"""What someone watching ``connectx train`` sees of PPO's progress.

Where stderr is a terminal, a progress bar of the session's steps on stderr
(:class:`connectx_gym.progress.Progress`; log lines are written above it, see
:mod:`connectx_gym.logs`). Into a pipe or a file (``nohup connectx train 2> log &``), where a bar
would show nothing until the end, a log line a minute instead:
``PPO: step N/M, K steps/s, ~T min left``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from connectx_gym.progress import Progress
from connectx_train.budget import minutes

__all__ = ["PROGRESS_EVERY", "PPOProgress"]

#: seconds between progress lines where no progress bar is shown
PROGRESS_EVERY = 60.0


class PPOProgress:
    """The bar (``bar``) or the progress lines (to ``log``) of one session's PPO steps, timed by
    ``clock`` (seconds) against its ``deadline`` on that clock."""

    def __init__(
        self, log: Callable[[str], None], clock: Callable[[], float], deadline: float, bar: bool
    ) -> None:
        self.log, self.clock, self.deadline, self.show_bar = log, clock, deadline, bar
        self.bar = Progress(0, "PPO steps", enabled=False)
        self.started = self.last = 0.0
        self.first = self.total = 0

    def start(self, steps: int, total: int) -> None:
        """The session starts at step ``steps`` of ``total``."""
        self.started = self.last = self.clock()
        self.first, self.total = steps, total
        self.bar = Progress(total - steps, "PPO steps", enabled=self.show_bar)

    def update(self, steps: int) -> None:
        """The bar at step ``steps``."""
        self.bar.update(steps - self.first - self.bar.done)

    def announce(self, steps: int) -> None:
        """``PPO: step N/M, K steps/s, ~T min left``, once a minute where no bar is shown."""
        now = self.clock()
        if self.show_bar or now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        rate = (steps - self.first) / max(now - self.started, 1e-9)
        left = max(self.total - steps, 0) / rate if rate > 0 else math.inf
        capped = " (the time limit first)" if now + left > self.deadline else ""
        self.log(
            f"PPO: step {steps:,}/{self.total:,}, {rate:.0f} steps/s, "
            f"{minutes(min(left, self.deadline - now))} left{capped}"
        )

    def close(self) -> None:
        """End the bar."""
        self.bar.close()

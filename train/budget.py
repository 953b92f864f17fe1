"""One bound for the whole run: how ``--max-minutes`` is shared between a run's phases.

A session of ``connectx train`` has four phases: labelling the teacher positions, teaching the
policy (supervised passes), PPO and the final panel. ``--max-minutes`` bounds the session as a
whole (:class:`Budget`), and the phases share it so that PPO always gets its share:

- the final panel's time is estimated from a few timed games, played after an untimed one
  against each opponent (:func:`panel_seconds`), and kept aside (PPO stops early enough for it:
  :meth:`Budget.ppo_deadline`);
- labelling and teaching together get at most :data:`TEACHER_SHARE` of the rest. Labelling is
  not cut (its chunks are kept in the run's folder and reused by the next session); the
  teaching passes are planned from a timed first batch (:func:`plan_teaching`): fewer passes
  when all do not fit, one pass over fewer positions when one does not, and the log says so;
- PPO gets everything else. Where its steps, estimated from the same timed batch
  (:func:`ppo_seconds`), would not all fit after the teaching passes, the passes give way, down
  to :data:`TEACHING_GIVES_WAY` of them (:meth:`Budget.teaching_for_ppo`): on a slower CPU the
  run still trains all of its steps. A run that cannot finish PPO in the session anyway (a bound
  far shorter than the run) keeps the passes of its share.

Every phase stops at the bound itself (:meth:`Budget.over`): a stop in labelling or teaching
keeps the chunks labelled and the passes done, and the same command goes on from them. PPO
looks at every env step of a rollout (:class:`RolloutBound`) and stops where what follows the
rollout (its update, an evaluation due) would no longer end by its deadline; the rollout so cut
is not trained on, and the run goes back to its last complete update
(:class:`connectx_train.model.LastUpdate`), the checkpoint from which ``--resume`` goes on.

What someone watching a run sees of its progress against the bound: :class:`EtaLog`'s progress
lines with the time left (labelling, teaching, the final panel) and PPO's (:class:`PPOProgress`):
where stderr is a terminal, a progress bar of the session's steps on stderr
(:class:`connectx_gym.progress.Progress`; log lines are written above it, see
:mod:`connectx_gym.logs`); into a pipe or a file (``nohup connectx train 2> log &``), where a bar
would show nothing until the end, a log line a minute instead:
``PPO: step N/M, K steps/s, ~T min left``.

Before that, a run is sized to its steps (:func:`sized_teacher_fraction`): the supervised passes
see at most as many positions as PPO's updates do (``timesteps * n_epochs``), so a short run gets
a short teacher (the default run and the presets are below that cap and keep their whole set).

This module imports neither torch nor SB3.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from connectx_gym.progress import Progress
from connectx_train.state import SessionClock

__all__ = [
    "LABEL_SECONDS_PER_CHUNK",
    "MIN_TEACHER_POSITIONS",
    "PPO_OVER_UPDATES",
    "PROGRESS_EVERY",
    "TEACHER_SHARE",
    "TEACHING_GIVES_WAY",
    "Budget",
    "EtaLog",
    "PPOProgress",
    "RolloutBound",
    "TeachingPlan",
    "TimeLimitReachedError",
    "minutes",
    "panel_seconds",
    "passes_seconds",
    "plan_teaching",
    "ppo_seconds",
    "sized_teacher_fraction",
]

#: the most of a bounded session (less the final panel) that labelling and teaching may take
TEACHER_SHARE = 1 / 3
#: the least of :data:`TEACHER_SHARE` left to the teaching passes when labelling took the rest
TEACHING_FLOOR = 1 / 4
#: the least share of its planned passes that teaching keeps when it gives way to PPO's steps
TEACHING_GIVES_WAY = 1 / 2
#: PPO's wall time over its updates' time as the timed teacher batches predict it (the rollouts,
#: the periodic evaluations and the checkpoints besides the updates; docs/experiments/ has the
#: measurements)
PPO_OVER_UPDATES = 1.2
#: seconds one worker takes to label a chunk of 250 positions: the estimate announced before
#: labelling
LABEL_SECONDS_PER_CHUNK = 9.0
#: below this many positions after sizing, the teacher is skipped: a short run would spend as
#: long on a few passes as on PPO, for little
MIN_TEACHER_POSITIONS = 5_000
#: the final panel's estimate is this many times its timed sample (the trained agent plays
#: longer games than the untrained one that is timed)
PANEL_SAFETY = 2.0


class TimeLimitReachedError(Exception):
    """The session reached ``--max-minutes`` in a phase that stops and goes on next session."""


def minutes(seconds: float) -> str:
    """``seconds`` as a short duration for the log (``"~2.5 min"``, ``"~40 s"``)."""
    if not math.isfinite(seconds):
        return "no limit"
    return f"~{seconds / 60:.1f} min" if seconds >= 90 else f"~{max(seconds, 0):.0f} s"


@dataclass
class Budget:
    """The session's bound (``math.inf``: none) on its :class:`~connectx_train.state.SessionClock`,
    and the seconds kept aside for the final panel once estimated."""

    clock: SessionClock
    bound: float
    panel_seconds: float = 0.0

    @classmethod
    def from_minutes(cls, clock: SessionClock, max_minutes: float) -> Budget:
        """The budget of ``--max-minutes`` (0: no bound)."""
        return cls(clock, 60 * max_minutes if max_minutes else math.inf)

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.bound)

    def elapsed(self) -> float:
        """Seconds of this session so far."""
        return self.clock.session_seconds()

    def over(self) -> bool:
        """Whether the session has reached its bound."""
        return self.elapsed() >= self.bound

    def teacher_share(self) -> float:
        """Seconds that labelling and teaching may take in all."""
        return TEACHER_SHARE * max(self.bound - self.panel_seconds, 0.0)

    def teaching_allowed(self) -> float:
        """Seconds left to the teaching passes now (after labelling), never less than
        :data:`TEACHING_FLOOR` of the teacher's share."""
        share = self.teacher_share()
        return max(share - self.elapsed(), TEACHING_FLOOR * share)

    def teaching_for_ppo(self, ppo_seconds: float, teaching_seconds: float) -> float | None:
        """The seconds left to the teaching passes so that PPO's estimated ``ppo_seconds`` fit
        after them, where the ``teaching_seconds`` planned would leave too few and giving way
        keeps at least :data:`TEACHING_GIVES_WAY` of them; ``None`` where PPO fits anyway or
        would not fit even so (a run that takes several sessions keeps its share)."""
        wanted = min(teaching_seconds, self.teaching_allowed())
        left = self.ppo_deadline() - self.elapsed() - ppo_seconds
        return left if TEACHING_GIVES_WAY * wanted <= left < wanted else None

    def ppo_deadline(self) -> float:
        """Session seconds at which PPO stops, leaving the final panel its time."""
        return self.bound - self.panel_seconds

    def describe(
        self, teaching: str | None, labelling: str | None, teaching_seconds: float = 0.0
    ) -> str:
        """The announcement of how the session will spend its time (``None``: a resumed
        session, whose teacher phase is behind it); PPO's part is what is left after the
        ``teaching_seconds`` still to come and the final panel."""
        ppo = self.ppo_deadline() - self.elapsed() - teaching_seconds
        teacher = "" if teaching is None else f"labelling {labelling}, teaching {teaching}, "
        panel = "not timed" if not self.bounded else minutes(self.panel_seconds)
        if not self.bounded:
            return (
                f"budget: no --max-minutes; {teacher}PPO until its steps are done, "
                f"final panel {panel}"
            )
        return (
            f"budget {self.bound / 60:.1f} min: {teacher}PPO >= {max(ppo, 0) / 60:.1f} min "
            f"(the rest), final panel {panel}"
        )


@dataclass(frozen=True)
class TeachingPlan:
    """The supervised passes a session makes: ``epochs`` passes over ``positions`` positions
    (the first ``positions`` of a seeded shuffle when fewer than all), and the note that says
    what was cut (``None``: nothing)."""

    epochs: int
    positions: int
    seconds: float
    note: str | None = None


def passes_seconds(epochs: int, positions: int, batch_size: int, seconds_per_batch: float) -> float:
    """The seconds of ``epochs`` whole passes over ``positions`` at ``seconds_per_batch``."""
    return epochs * max(positions // batch_size, 1) * seconds_per_batch


def ppo_seconds(
    timesteps: int,
    rollout_steps: int,
    n_epochs: int,
    replay_positions: int,
    seconds_per_position: float,
) -> float:
    """The estimated wall time of PPO's ``timesteps`` steps in rollouts of ``rollout_steps``,
    each followed by ``n_epochs`` passes over it and a replay of ``replay_positions`` teacher
    positions, where a position of a minibatch takes ``seconds_per_position`` (timed on teacher
    batches): the updates' time, times :data:`PPO_OVER_UPDATES`."""
    rollouts = math.ceil(timesteps / rollout_steps)
    positions = rollouts * (n_epochs * rollout_steps + replay_positions)
    return PPO_OVER_UPDATES * positions * seconds_per_position


def plan_teaching(
    epochs: int,
    positions: int,
    batch_size: int,
    seconds_per_batch: float,
    allowed: float,
    reason: str = "to keep PPO's share of --max-minutes",
) -> TeachingPlan:
    """``epochs`` passes over ``positions`` when they fit in ``allowed`` seconds at
    ``seconds_per_batch``; else as many whole passes as fit; else one pass over the positions
    that fit (at least one batch); a cut says why (``reason``)."""
    per_pass = passes_seconds(1, positions, batch_size, seconds_per_batch)
    whole = epochs * per_pass
    if whole <= allowed:
        return TeachingPlan(epochs, positions, whole)
    fitting = int(allowed // per_pass) if per_pass > 0 else epochs
    why = f"{reason} (all {epochs} would take {minutes(whole)})"
    if fitting >= 1:
        note = f"teaching cut to {fitting} of {epochs} passes {why}"
        return TeachingPlan(fitting, positions, fitting * per_pass, note)
    kept_batches = max(int(allowed // seconds_per_batch) if seconds_per_batch > 0 else 1, 1)
    kept = min(kept_batches * batch_size, positions)
    note = f"teaching cut to one pass over {kept:,} of {positions:,} positions {why}"
    return TeachingPlan(1, kept, kept_batches * seconds_per_batch, note)


def panel_seconds(play: Callable[[int], object], final_games: int, sample_games: int) -> float:
    """The seconds to keep aside for a final panel of ``final_games`` games an opponent:
    ``play(games)`` plays that many against each opponent; ``play(1)`` first, untimed, since on
    a fresh install it compiles the opponents' kernels (a one-off cost that, counted once per
    game, would leave PPO none of the bound), then ``play(sample_games)`` timed, scaled by
    :data:`PANEL_SAFETY`."""
    play(1)
    started = time.perf_counter()
    play(sample_games)
    return PANEL_SAFETY * (time.perf_counter() - started) * final_games / sample_games


def sized_teacher_fraction(
    timesteps: int, n_epochs: int, teacher_epochs: int, positions: int
) -> float:
    """The share of the teacher positions a run of ``timesteps`` steps keeps: all while the
    passes see at most as many positions as PPO's updates (``timesteps * n_epochs``), else the
    share that makes them equal."""
    cap = timesteps * n_epochs
    wanted = teacher_epochs * positions
    return 1.0 if wanted <= cap else cap / wanted


class EtaLog:
    """Progress lines with the time left: one each ``every`` seconds or each tenth of the
    ``total`` work, whichever comes first, and one at the end; the rate is measured from the
    work done when it was made (``done_at_start``: what earlier sessions did)."""

    def __init__(
        self,
        log: Callable[[str], None],
        total: float,
        done_at_start: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
        every: float = 30.0,
    ) -> None:
        self.log, self.total, self.clock, self.every = log, total, clock, every
        self.first = done_at_start
        self.started = self.last_time = clock()
        self.last_tenth = int(10 * done_at_start / total) if total else 10

    def update(self, done: float, text: Callable[[str], str]) -> None:
        """Log ``text("~N min left")`` when a line is due, ``done`` of the work being done."""
        now = self.clock()
        tenth = int(10 * done / self.total) if self.total else 10
        if tenth <= self.last_tenth and now - self.last_time < self.every and done < self.total:
            return
        self.last_tenth, self.last_time = tenth, now
        rate = (done - self.first) / max(now - self.started, 1e-9)
        left = (self.total - done) / rate if rate > 0 else math.inf
        self.log(text(f"{minutes(left)} left" if done < self.total else "done"))


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


class RolloutBound:
    """Where the time bound cuts one of PPO's rollouts, asked at every env step (:meth:`passed`):
    once the ``clock`` (seconds) is past the ``deadline`` less what follows the rollout before the
    next (its periodic jobs, the teacher replay and PPO's update: the longest such time this
    session, :meth:`ended`), so that a rollout's update ends by the deadline. Where an evaluation
    falls due at the rollout's end (:meth:`start`), the longest of either kind is kept aside."""

    def __init__(self, clock: Callable[[], float], deadline: float) -> None:
        self.clock, self.deadline = clock, deadline
        self.after = {False: 0.0, True: 0.0}  # seconds after a rollout, by evaluation due
        self.evaluating = False

    def start(self, evaluating: bool) -> None:
        """A rollout starts, at whose end an evaluation falls due (``evaluating``) or not."""
        self.evaluating = evaluating

    def passed(self) -> bool:
        """Whether the rollout stops here: the rest of its time and its update would not fit."""
        reserve = max(self.after.values()) if self.evaluating else self.after[False]
        return self.clock() > self.deadline - reserve

    def ended(self, seconds: float) -> None:
        """The rollout's jobs and update took ``seconds``."""
        self.after[self.evaluating] = max(self.after[self.evaluating], seconds)

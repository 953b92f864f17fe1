"""Play a match's games, or answer an accuracy run's positions, as Ray tasks.

``play_match(..., executor=RayExecutor())``, and the search package's judge of moves against
perfect play with ``executor=RayExecutor()``. Each worker is a Ray actor that builds the policies
once, then plays the games it is handed with :func:`connectx_gym.match.play_indexed_game` (or
answers positions with :func:`connectx_gym.policy.answer_position`), the same functions the local
loops call, from each game's or position's own spawned seed; so results, JSON and saved games equal
the local run's for the same seed. ``progress=True`` shows a bar on stderr (tqdm if installed, else
a counter); an interrupt (Ctrl-C) cancels the outstanding tasks and kills the actors, and
:meth:`RayExecutor.close` stops the local instance. Ray is an optional extra (``pip install -e
".[ray]"``) imported only when an executor is made.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Generator, Iterator, Sequence
from contextlib import closing, suppress
from typing import Any

from connectx_gym.bitboard import Geometry
from connectx_gym.match import GameJob, GameOutcome, PolicyLike
from connectx_gym.policy import PositionJob
from connectx_gym.progress import Progress

__all__ = [
    "LOCAL_SYSTEM_CONFIG",
    "RayExecutor",
    "RayGameError",
    "RayPositionError",
    "RayWorkerError",
    "check_address",
    "import_ray",
]

INSTALL_HINT = 'Ray is not installed: pip install "ray>=2.9" (or pip install -e ".[ray]")'


class RayWorkerError(RuntimeError):
    """A worker failed on job ``index`` (a game or a position)."""

    what = "job"

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"{self.what} {index} failed on a Ray worker: {message}")
        self.index = index


class RayGameError(RayWorkerError):
    """A worker failed while playing game ``game`` of a match."""

    what = "game"

    @property
    def game(self) -> int:
        return self.index


class RayPositionError(RayWorkerError):
    """A worker failed while answering position ``position`` of an accuracy run."""

    what = "position"

    @property
    def position(self) -> int:
        return self.index


def import_ray() -> Any:
    """Import Ray, or raise ImportError with the install hint."""
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(INSTALL_HINT) from error
    return ray


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


class _GameWorker:
    """Builds both policies once; plays games of one match."""

    def __init__(self, player_a: PolicyLike, player_b: PolicyLike, geometry: Geometry) -> None:
        from connectx_gym.registry import make_policy

        self.a, self.b = make_policy(player_a), make_policy(player_b)
        self.geometry = geometry

    def play(self, job: GameJob) -> GameOutcome | str:
        """The game's outcome, or the one-line error (a string) that stopped it."""
        from connectx_gym.match import play_indexed_game

        try:
            return play_indexed_game(self.a, self.b, self.geometry, job)
        except Exception as error:
            return _one_line(error)


class _PositionWorker:
    """Builds the policy once; answers chunks of positions."""

    def __init__(self, policy: PolicyLike, geometry: Geometry, who: str) -> None:
        from connectx_gym.registry import make_policy

        self.player, self.geometry, self.who = make_policy(policy), geometry, who

    def answer(self, jobs: list[PositionJob]) -> list[int | None] | tuple[int, str]:
        """The chunk's answers, or (index, one-line error) for the position that stopped it."""
        from connectx_gym.policy import answer_position

        answers: list[int | None] = []
        for job in jobs:
            try:
                answers.append(answer_position(self.player, self.geometry, job, self.who))
            except Exception as error:
                return job.index, _one_line(error)
        return answers


def check_address(address: str) -> tuple[str, int] | None:
    """The host and port of a Ray ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``), None for
    ``auto`` (Ray finds the cluster); ``ValueError`` naming the address for anything else."""
    if address == "auto":
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(
            f"expected a Ray address HOST:PORT, ray://HOST:PORT or auto, got {address!r}"
        )
    return host, int(port)


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast on a ``host:port`` nobody listens on (Ray itself retries for minutes)."""
    import socket

    where = check_address(address)
    if where is None:
        return
    host, port = where
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise ConnectionError(f"no Ray cluster at {address}: {error}") from None


#: Settings of a local Ray instance this package starts. Ray runs its workers at nice 15 by
#: default, below every ordinary process: the actors that play, roll out and label would get only
#: the CPU time the machine's other work leaves, many times slower beside a busy process. They run
#: at the niceness of the command that started them instead (``nice connectx ...`` still lowers
#: them all).
LOCAL_SYSTEM_CONFIG: dict[str, object] = {"worker_niceness": 0}


class RayExecutor:
    """Distributes games over ``workers`` Ray actors (default: the cluster's CPUs).

    ``address=None`` starts a local Ray instance sized to the machine (stopped by :meth:`close`);
    an address (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) joins an existing cluster.
    Use as a context manager. ``progress=True`` shows a progress bar on stderr. Interrupting the
    iteration (Ctrl-C) cancels the outstanding tasks and kills the actors.
    """

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        num_cpus: int | None = None,
        progress: bool = False,
    ) -> None:
        ray = import_ray()
        self.progress = progress
        self._started = False
        if address is not None:
            _check_reachable(address)
        if not ray.is_initialized():
            try:
                if address is None:
                    ray.init(
                        # a new instance, never whatever cluster Ray's temp folder names
                        address="local",
                        num_cpus=num_cpus or os.cpu_count(),
                        include_dashboard=False,
                        log_to_driver=False,
                        logging_level=logging.ERROR,
                        _system_config=LOCAL_SYSTEM_CONFIG,
                    )
                else:
                    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except BaseException as error:
                # a start that failed or was interrupted half way leaves no Ray process behind
                with suppress(Exception):
                    ray.shutdown()
                if not isinstance(error, Exception):
                    raise
                raise ConnectionError(
                    f"cannot start or join Ray at {address or 'a local instance'}: "
                    f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
                ) from None
            self._started = True
        self._ray = ray
        try:
            self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        except BaseException:
            self.close()
            raise

    def map_games(
        self, player_a: PolicyLike, player_b: PolicyLike, geometry: Geometry, jobs: list[GameJob]
    ) -> Iterator[GameOutcome]:
        """Yield the outcomes of ``jobs`` in order, played by actors that build A and B once."""
        actors = self._actors(_GameWorker, len(jobs), player_a, player_b, geometry)
        refs = [actors[i % len(actors)].play.remote(job) for i, job in enumerate(jobs)]
        indices = [job.index for job in jobs]
        with closing(self._results(actors, refs, indices, "games")) as outcomes:
            for index, outcome in zip(indices, outcomes, strict=False):
                if isinstance(outcome, str):
                    raise RayGameError(index, outcome)
                yield outcome

    def map_positions(
        self,
        policy: PolicyLike,
        geometry: Geometry,
        jobs: Sequence[PositionJob],
        who: str,
        chunk: int | None = None,
    ) -> Iterator[int | None]:
        """Yield :func:`~connectx_gym.policy.answer_position` for ``jobs`` in order, answered in
        chunks of ``chunk`` positions (default: about four chunks per worker, at most 32) by actors
        that build the policy once."""
        if not jobs:
            return
        size = chunk or max(1, min(32, math.ceil(len(jobs) / (4 * self.workers))))
        chunks = [list(jobs[i : i + size]) for i in range(0, len(jobs), size)]
        actors = self._actors(_PositionWorker, len(chunks), policy, geometry, who)
        refs = [actors[i % len(actors)].answer.remote(part) for i, part in enumerate(chunks)]
        firsts = [part[0].index for part in chunks]
        sizes = [len(part) for part in chunks]
        results = self._results(actors, refs, firsts, "positions", sizes, RayPositionError)
        with closing(results):
            for answers in results:
                if isinstance(answers, tuple):
                    raise RayPositionError(*answers)
                yield from answers

    def _actors(self, worker: type, tasks: int, *args: Any) -> list[Any]:
        actor_class = self._ray.remote(num_cpus=1)(worker)
        return [actor_class.remote(*args) for _ in range(min(self.workers, tasks))]

    def _results(
        self,
        actors: list[Any],
        refs: list[Any],
        indices: list[int],
        what: str,
        sizes: list[int] | None = None,
        error: type[RayWorkerError] = RayGameError,
    ) -> Generator[Any, None, None]:
        """The results of ``refs`` in order, with a progress bar; on an error or an interrupt the
        tasks not yet collected are cancelled and the actors killed."""
        ray = self._ray
        sizes = sizes or [1] * len(refs)
        progress = Progress(sum(sizes), what, enabled=self.progress)
        collected = 0
        try:
            for ref, index, size in zip(refs, indices, sizes, strict=True):
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as failure:  # the worker died or could not start
                    raise error(index, str(failure).splitlines()[0]) from None
                collected += 1
                progress.update(size)
                yield result
        finally:
            progress.close()
            try:
                for ref in refs[collected:]:
                    ray.cancel(ref, force=False)
                for actor in actors:
                    ray.kill(actor)
            except Exception:  # pragma: no cover - Ray already stopped; nothing left to cancel
                pass

    def close(self) -> None:
        """Stop the local Ray instance this executor started."""
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Play a match's games as Ray tasks: ``play_match(..., executor=RayExecutor())``.

Each worker is a Ray actor that builds both policies once, then plays the games it is handed with
:func:`connectx_gym.match.play_indexed_game`, the same function the local loop calls, from each
game's own spawned seed; so results, JSON and saved games equal the local run's for the same seed.
Ray is an optional extra (``pip install -e ".[ray]"``) imported only when an executor is used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from connectx_gym.bitboard import Geometry
from connectx_gym.match import GameJob, GameOutcome, PolicyLike

__all__ = ["RayExecutor", "RayGameError", "import_ray"]

INSTALL_HINT = 'Ray is not installed: pip install "ray>=2.9" (or pip install -e ".[ray]")'


class RayGameError(RuntimeError):
    """A worker failed while playing game ``game`` of a match."""

    def __init__(self, game: int, message: str) -> None:
        super().__init__(f"game {game} failed on a Ray worker: {message}")
        self.game = game


def import_ray() -> Any:
    """Import Ray, or raise ImportError with the install hint."""
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(INSTALL_HINT) from error
    return ray


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
            return f"{type(error).__name__}: {error}"


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast on a ``host:port`` nobody listens on (Ray itself retries for minutes)."""
    import socket

    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(
            f"expected a Ray address HOST:PORT, ray://HOST:PORT or auto, got {address!r}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise ConnectionError(f"no Ray cluster at {address}: {error}") from None


class RayExecutor:
    """Distributes games over ``workers`` Ray actors (default: the cluster's CPUs).

    ``address=None`` starts a local Ray instance sized to the machine (stopped by :meth:`close`);
    an address (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) joins an existing cluster.
    Use as a context manager. Interrupting the iteration cancels the outstanding tasks.
    """

    def __init__(
        self, address: str | None = None, workers: int | None = None, num_cpus: int | None = None
    ) -> None:
        ray = import_ray()
        self._started = False
        if address is not None:
            _check_reachable(address)
        if not ray.is_initialized():
            try:
                if address is None:
                    ray.init(
                        num_cpus=num_cpus or os.cpu_count(),
                        include_dashboard=False,
                        log_to_driver=False,
                    )
                else:
                    ray.init(address=address, log_to_driver=False)
            except Exception as error:
                raise ConnectionError(
                    f"cannot start or join Ray at {address or 'a local instance'}: "
                    f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
                ) from None
            self._started = True
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._ray = ray

    def map_games(
        self, player_a: PolicyLike, player_b: PolicyLike, geometry: Geometry, jobs: list[GameJob]
    ) -> Iterator[GameOutcome]:
        """Yield the outcomes of ``jobs`` in order, played by actors that build A and B once."""
        ray = self._ray
        actor_class = ray.remote(num_cpus=1)(_GameWorker)
        actors = [
            actor_class.remote(player_a, player_b, geometry)
            for _ in range(min(self.workers, len(jobs)))
        ]
        refs = [actors[i % len(actors)].play.remote(job) for i, job in enumerate(jobs)]
        try:
            for index, ref in enumerate(refs):
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as error:  # the worker died or could not start
                    raise RayGameError(index, str(error).splitlines()[0]) from None
                if isinstance(outcome, str):
                    raise RayGameError(index, outcome)
                yield outcome
        finally:
            for ref in refs:
                ray.cancel(ref, force=False)
            for actor in actors:
                ray.kill(actor)

    def close(self) -> None:
        """Stop the local Ray instance this executor started."""
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Self-play on the PettingZoo env ``connectx_gym.pettingzoo`` with MaskablePPO.

The learner plays one seat of the two-player AEC game, drawn at each reset; the other seat is
played by an opponent drawn from a pool: uniformly random moves, or one of the latest frozen
copies ("snapshots") of the learner itself, one added after each generation. The learner sees
PettingZoo's observation, ``(rows, columns, 2)`` int8 from its own view (its discs in plane 0),
and its ``action_mask``. After training, the model plays 98 games against minimax depth 2 and
against random moves, every two-ply opening from both seats.

    python docs/tutorials/selfplay_pettingzoo.py                # the full run (150,000 steps)
    python docs/tutorials/selfplay_pettingzoo.py --short        # a few seconds, to try it
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.vec_env import DummyVecEnv

from connectx_gym import Board, Policy, play_match
from connectx_gym.pettingzoo import env as connectx_env


class SnapshotPool:
    """The opponents: ``None`` (random moves) and the latest ``size`` frozen learners."""

    def __init__(self, size: int = 5, random_share: float = 0.2) -> None:
        self.size = size
        self.random_share = random_share
        self.snapshots: list[MaskableActorCriticPolicy] = []

    def add(self, policy: MaskableActorCriticPolicy) -> None:
        frozen = type(policy)(**policy._get_constructor_parameters())
        frozen.load_state_dict(policy.state_dict())
        frozen.set_training_mode(False)
        self.snapshots = [*self.snapshots, frozen][-self.size :]

    def draw(self, rng: np.random.Generator) -> MaskableActorCriticPolicy | None:
        if not self.snapshots or rng.random() < self.random_share:
            return None
        return self.snapshots[rng.integers(len(self.snapshots))]


class OneSeat(gym.Env):
    """One seat of the PettingZoo game as a single-agent Gymnasium env; a pool opponent plays
    the other seat inside ``reset`` and ``step``."""

    def __init__(self, pool: SnapshotPool, rows: int = 6, columns: int = 7, inarow: int = 4):
        self.game = connectx_env(rows, columns, inarow)
        self.observation_space = self.game.observation_space("player_0")["observation"]
        self.action_space = self.game.action_space("player_0")
        self.pool = pool
        self.opponent: MaskableActorCriticPolicy | None = None
        self.me = "player_0"

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.game.reset(seed=seed)
        self.me = self.game.possible_agents[self.np_random.integers(2)]
        self.opponent = self.pool.draw(self.np_random)
        self._play_opponent()
        return self.game.observe(self.me)["observation"], {}

    def step(self, action: int):
        self.game.step(int(action))
        self._play_opponent()
        over = self.game.terminations[self.me] or self.game.truncations[self.me]
        observation = self.game.observe(self.me)["observation"]
        return observation, float(self.game.rewards[self.me]), over, False, {}

    def action_masks(self) -> np.ndarray:  # found by MaskablePPO
        return self.game.observe(self.me)["action_mask"].astype(bool)

    def _play_opponent(self) -> None:
        other = self.game.agent_selection
        if other == self.me or self.game.terminations[other]:
            return
        seen = self.game.observe(other)
        if self.opponent is None:
            action = self.np_random.choice(np.flatnonzero(seen["action_mask"]))
        else:
            action, _ = self.opponent.predict(
                seen["observation"], action_masks=seen["action_mask"].astype(bool)
            )
        self.game.step(int(action))


class ModelPolicy(Policy):
    """The trained model as a connectx-gym ``Policy``: PettingZoo's layout from a ``Board``."""

    name = "selfplay"

    def __init__(self, model: MaskablePPO) -> None:
        super().__init__()
        self.model = model

    def act(self, board: Board, rng: np.random.Generator) -> int:
        observation = board.to_planes().transpose(1, 2, 0)  # (2, rows, cols) -> (rows, cols, 2)
        action, _ = self.model.predict(
            observation, action_masks=board.legal_mask(), deterministic=True
        )
        return int(action)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=150_000, help="learner moves to train")
    parser.add_argument("--short", action="store_true", help="a few seconds: 4,096 steps")
    parser.add_argument("--generations", type=int, default=10, help="snapshots added")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--games", type=int, default=None, help="games per match (default 98)")
    return parser.parse_args()


def main() -> dict[str, float]:
    args = parse_args()
    timesteps = 4_096 if args.short else args.timesteps
    generations = 2 if args.short else args.generations
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    start = time.perf_counter()

    pool = SnapshotPool()
    venv = DummyVecEnv([lambda: OneSeat(pool) for _ in range(args.n_envs)])
    venv.seed(args.seed)
    model = MaskablePPO(
        "MlpPolicy",
        venv,
        policy_kwargs={"net_arch": [256, 256]},
        n_steps=256,
        batch_size=256,
        n_epochs=4,
        ent_coef=0.01,
        seed=args.seed,
        verbose=0,
    )
    before = play_match(ModelPolicy(model), "random", games=args.games, seed=args.seed).score
    for generation in range(generations):
        model.learn(timesteps // generations, reset_num_timesteps=generation == 0)
        pool.add(model.policy)  # later games may meet this frozen copy
        print(f"generation {generation + 1}/{generations}: {model.num_timesteps:,} steps")
    train_minutes = (time.perf_counter() - start) / 60

    agent = ModelPolicy(model)
    results = {
        name: play_match(agent, name, games=args.games, seed=args.seed)
        for name in ("minimax:depth=2", "random")
    }
    for result in results.values():
        print(result.summary())
    figures = {
        "timesteps": float(model.num_timesteps),
        "train_minutes": train_minutes,
        "score_vs_minimax2": results["minimax:depth=2"].score,
        "score_vs_random_untrained": before,
        "score_vs_random": results["random"].score,
        "illegal_moves": float(sum(r.illegal_a for r in results.values())),
    }
    print(
        f"{model.num_timesteps} steps in {train_minutes:.1f} min; score vs minimax:depth=2 "
        f"{figures['score_vs_minimax2']:.3f}, vs random {figures['score_vs_random']:.3f} "
        f"(untrained: {before:.3f})"
    )
    return figures


if __name__ == "__main__":
    main()

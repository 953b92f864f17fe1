"""MaskablePPO on ``ConnectX-v0`` against ``minimax:depth=2``, from your own script.

sb3-contrib's MaskablePPO finds the env's ``action_masks()`` by itself; the network is the
project's small residual CNN (``ConnectXCNN``) behind SB3's ``"MlpPolicy"``: SB3's
``"CnnPolicy"`` refuses the env's ``(2, rows, columns)`` planes (they are not an image).
After training, the model plays 98 games against minimax depth 2 and against random moves,
every two-ply opening from both seats.

    python docs/tutorials/maskable_ppo.py                # the full run (400,000 steps)
    python docs/tutorials/maskable_ppo.py --short              # a few seconds, to try it
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

import connectx_gym  # noqa: F401 - registers ConnectX-v0
from connectx_gym import Board, Policy, play_match
from connectx_train.networks import ConnectXCNN

OPPONENT = "minimax:depth=2"


class ModelPolicy(Policy):
    """A trained SB3 model as a connectx-gym ``Policy``, so that ``play_match`` can play it."""

    name = "maskable_ppo"

    def __init__(self, model: MaskablePPO) -> None:
        super().__init__()
        self.model = model

    def act(self, board: Board, rng: np.random.Generator) -> int:
        action, _ = self.model.predict(
            board.to_planes(), action_masks=board.legal_mask(), deterministic=True
        )
        return int(action)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=400_000, help="PPO steps to train")
    parser.add_argument("--short", action="store_true", help="a few seconds: 2,048 steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-envs", type=int, default=8)
    parser.add_argument("--games", type=int, default=None, help="games per match (default 98)")
    parser.add_argument("--save", default=None, help="where to save the model (.zip)")
    return parser.parse_args()


def main() -> dict[str, float]:
    args = parse_args()
    timesteps = 2_048 if args.short else args.timesteps
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # small batches: one thread is fastest on a small CPU
    start = time.perf_counter()

    env = make_vec_env(
        "ConnectX-v0",
        n_envs=args.n_envs,
        seed=args.seed,
        env_kwargs={"opponent": OPPONENT, "opening_plies": 2},
    )
    model = MaskablePPO(
        "MlpPolicy",  # not "CnnPolicy": SB3 would take the planes for a tiny image and refuse
        env,
        policy_kwargs={
            "features_extractor_class": ConnectXCNN,
            "features_extractor_kwargs": {"channels": 32, "blocks": 1, "features_dim": 128},
        },
        n_steps=256,
        batch_size=256,
        n_epochs=4,
        learning_rate=3e-4,
        ent_coef=0.01,
        seed=args.seed,
        verbose=0,
    )
    before = play_match(ModelPolicy(model), "random", games=args.games, seed=args.seed).score
    model.learn(timesteps)
    train_minutes = (time.perf_counter() - start) / 60
    if args.save:
        model.save(args.save)

    agent = ModelPolicy(model)
    results = {
        name: play_match(agent, name, games=args.games, seed=args.seed)
        for name in (OPPONENT, "random")
    }
    for result in results.values():
        print(result.summary())
    figures = {
        "timesteps": float(timesteps),
        "train_minutes": train_minutes,
        "score_vs_minimax2": results[OPPONENT].score,
        "score_vs_random_untrained": before,
        "score_vs_random": results["random"].score,
        "illegal_moves": float(sum(r.illegal_a for r in results.values())),
    }
    print(
        f"{timesteps} steps in {train_minutes:.1f} min; "
        f"score vs {OPPONENT} {figures['score_vs_minimax2']:.3f}, "
        f"vs random {figures['score_vs_random']:.3f} "
        f"(untrained: {before:.3f})"
    )
    return figures


if __name__ == "__main__":
    main()

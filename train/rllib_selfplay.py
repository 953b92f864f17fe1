"""Multi-agent PPO on Ray RLlib: self-play with one shared policy, or against a registered opponent.

The environment is the PettingZoo adapter :mod:`connectx_gym.pettingzoo` (turn-based AEC) seen as
an RLlib ``MultiAgentEnv``: both seats (``player_0``, ``player_1``) map to one RLModule,
``"shared"``, so in self-play the policy plays and learns from both sides. With an ``opponent``
spec (``"random"``, ``"minimax:depth=2"``, a saved agent), the opponent's seat is played inside
the env by that policy and the learner takes the other seat, alternating seats by episode.
Observations are the adapter's, flattened to float32 (``observations``: the mover's discs, then the
other player's, row 0 on top; ``action_mask``: the legal columns); :class:`MaskedPPOModule` is
RLlib's default PPO module with the illegal columns masked, so they are never sampled. Needs
``pip install -e ".[rllib]"`` (``ray[rllib]``, which pins its own gymnasium: see the README,
"Scale out on Ray")::

    python -m connectx_train.rllib_selfplay --iterations 50                     # self-play, local
    Ray python -m connectx_train.rllib_selfplay --opponent onestep --ray HEAD:6379  # on a cluster
    python -m connectx_train.rllib_selfplay --iterations 1 --batch 256 --eval-games 10   # smoke run

After training, the learned module plays ``--eval-games`` games against ``--eval-opponent``
through :func:`connectx_gym.match.play_match` (:class:`RLlibPolicy` adapts it to a Policy).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

try:
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import (
        DefaultPPOTorchRLModule,
    )
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.multi_agent_env import MultiAgentEnv
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f'connectx_train.rllib_selfplay needs RLlib: pip install -e ".[rllib]" ({error})'
    ) from None

if TYPE_CHECKING:
    from ray.rllib.utils.typing import MultiAgentDict

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.match import play_match
from connectx_gym.pettingzoo import AGENTS
from connectx_gym.pettingzoo import env as pettingzoo_env
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy

__all__ = [
    "MODULE_ID",
    "ConnectXMultiAgentEnv",
    "MaskedPPOModule",
    "RLlibPolicy",
    "board_observation",
    "build_config",
    "main",
    "train",
]

#: The one RLModule both seats map to.
MODULE_ID = "shared"


def _convert(observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {
        "observations": observation["observation"].astype(np.float32).ravel(),
        "action_mask": observation["action_mask"].astype(np.float32),
    }


def board_observation(board: Board) -> dict[str, np.ndarray]:
    """The mover's observation of ``board``, as :class:`ConnectXMultiAgentEnv` gives it."""
    planes = np.ascontiguousarray(board.to_planes().transpose(1, 2, 0))
    return _convert({"observation": planes, "action_mask": board.legal_mask().astype(np.int8)})


class ConnectXMultiAgentEnv(MultiAgentEnv):
    """:func:`connectx_gym.pettingzoo.env` as an RLlib ``MultiAgentEnv`` (agents ``player_0``,
    ``player_1``; only the agent to move gets an observation).

    ``config``: ``rows``, ``columns``, ``inarow`` (6, 7, 4), ``opponent`` (a policy spec that
    plays one seat inside the env, the learner taking the other, alternating by episode; None:
    both seats are learners) and ``seed`` (the opponent's generator).
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(config or {})
        self.geometry = Geometry(
            config.get("rows", 6), config.get("columns", 7), config.get("inarow", 4)
        )
        rows, columns, inarow = self.geometry.key
        self.game = pettingzoo_env(rows, columns, inarow)
        spec = config.get("opponent")
        self.opponent: Policy | None = None if spec is None else make_policy(spec)
        self.rng = np.random.default_rng(config.get("seed"))
        self.episodes = 0
        self.opponent_agent: str | None = None
        self.possible_agents = list(AGENTS)
        self.agents = list(AGENTS)
        space = gym.spaces.Dict(
            {
                "observations": gym.spaces.Box(0.0, 1.0, (rows * columns * 2,), np.float32),
                "action_mask": gym.spaces.Box(0.0, 1.0, (columns,), np.float32),
            }
        )
        self.observation_spaces = dict.fromkeys(AGENTS, space)
        self.action_spaces = dict.fromkeys(AGENTS, gym.spaces.Discrete(columns))

    # RLlib's reset and step answer for every agent where gymnasium's Env, its base, answers
    # for one
    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.game.reset(seed=seed)
        if self.opponent is not None:
            self.opponent_agent = AGENTS[(self.episodes + 1) % 2]  # the learner starts episode 0
            self.opponent.reset()
        self.episodes += 1
        self._opponent_moves()
        agent = self.game.agent_selection
        return {agent: _convert(self.game.observe(agent))}, {}

    def step(  # type: ignore[override]
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        self.game.step(int(action_dict[self.game.agent_selection]))
        self._opponent_moves()
        observations, rewards, terminated, truncated, infos = {}, {}, {}, {}, {}
        while self.game.agents:
            observation, reward, done, cut, info = self.game.last()
            agent = self.game.agent_selection
            if agent != self.opponent_agent:
                observations[agent] = _convert(observation)
                rewards[agent], terminated[agent], truncated[agent] = float(reward), done, cut
                infos[agent] = info
            if not (done or cut):
                break
            self.game.step(None)
        over = not self.game.agents
        terminated["__all__"] = over and all(terminated.values())
        truncated["__all__"] = over and all(truncated.values())
        return observations, rewards, terminated, truncated, infos

    def _opponent_moves(self) -> None:
        game = self.game
        if self.opponent is None or game.agent_selection != self.opponent_agent:
            return
        if game.terminations[game.agent_selection] or game.truncations[game.agent_selection]:
            return
        game.step(self.opponent.act(game.unwrapped.board, self.rng))


class MaskedPPOModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO module on the ``observations`` part of a ``{"observations",
    "action_mask"}`` observation, with the logits of illegal columns pushed to a large negative
    number (so they are never sampled and carry no gradient)."""

    def __init__(self, *, observation_space: gym.spaces.Dict, **kwargs: Any) -> None:
        self.observation_space_with_mask = observation_space
        super().__init__(observation_space=observation_space["observations"], **kwargs)

    def setup(self) -> None:
        super().setup()  # the networks are built for the observations without the mask
        self.observation_space = self.observation_space_with_mask

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        observation = batch[Columns.OBS]
        return observation["action_mask"], {**batch, Columns.OBS: observation["observations"]}

    @staticmethod
    def _mask(output: dict[str, Any], mask: Any) -> dict[str, Any]:
        logits = output[Columns.ACTION_DIST_INPUTS]
        output[Columns.ACTION_DIST_INPUTS] = logits + torch.clamp(torch.log(mask), min=-1e9)
        return output

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        mask, batch = self._split(batch)
        return self._mask(super()._forward(batch, **kwargs), mask)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        mask, batch = self._split(batch)
        return self._mask(super()._forward_train(batch, **kwargs), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        if isinstance(batch[Columns.OBS], dict):
            _, batch = self._split(batch)
        return super().compute_values(batch, embeddings)


class RLlibPolicy(Policy):
    """A trained RLlib module as a :class:`~connectx_gym.policy.Policy`: the most likely legal
    column (greedy, no randomness)."""

    def __init__(self, module: Any, name: str = "rllib-ppo") -> None:
        super().__init__()
        self.module, self.name = module, name

    def act(self, board: Board, rng: np.random.Generator) -> int:
        observation = board_observation(board)
        batch = {"obs": {k: torch.from_numpy(v)[None] for k, v in observation.items()}}
        with torch.no_grad():
            logits = self.module.forward_inference(batch)["action_dist_inputs"][0].numpy()
        logits = np.where(board.legal_mask(), logits, -np.inf)
        return int(np.argmax(logits))


def build_config(
    opponent: str | None = None,
    batch: int = 2048,
    minibatch: int = 256,
    epochs: int = 4,
    env_runners: int = 1,
    hidden: tuple[int, ...] = (256, 256),
    lr: float = 3e-4,
    seed: int = 0,
    rows: int = 6,
    columns: int = 7,
    inarow: int = 4,
) -> PPOConfig:
    """The PPO configuration: one shared masked module for both seats."""
    env_config = {
        "rows": rows, "columns": columns, "inarow": inarow, "opponent": opponent, "seed": seed,
    }  # fmt: skip
    module = RLModuleSpec(
        module_class=MaskedPPOModule,
        model_config={"fcnet_hiddens": list(hidden), "head_fcnet_hiddens": []},
    )
    return (
        PPOConfig()
        .environment(ConnectXMultiAgentEnv, env_config=env_config)
        .multi_agent(
            policies={MODULE_ID}, policy_mapping_fn=lambda agent_id, episode, **kw: MODULE_ID
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={MODULE_ID: module}))
        .env_runners(num_env_runners=env_runners, num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=batch,
            minibatch_size=min(minibatch, batch),
            num_epochs=epochs,
            lr=lr,
            gamma=0.99,
        )
        .debugging(seed=seed, log_level="ERROR")
    )


def train(
    iterations: int,
    config: PPOConfig,
    report: Any = print,
) -> tuple[Any, list[dict[str, Any]]]:
    """Build the algorithm and run ``iterations`` training iterations (Ray must be initialised);
    returns the algorithm and one summary per iteration."""
    algo = config.build_algo()
    history = []
    for iteration in range(1, iterations + 1):
        started = time.perf_counter()
        result = algo.train()
        runners = result.get("env_runners", {})
        summary = {
            "iteration": iteration,
            "seconds": round(time.perf_counter() - started, 2),
            "env_steps": int(runners.get("num_env_steps_sampled_lifetime", 0)),
            "episodes": int(runners.get("num_episodes_lifetime", 0)),
            "episode_len_mean": runners.get("episode_len_mean"),
            "return_mean": runners.get("agent_episode_returns_mean", {}),
        }
        history.append(summary)
        report(summary)
    return algo, history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connectx_train.rllib_selfplay", description=__doc__
    )
    parser.add_argument("--iterations", type=int, default=20, help="training iterations (20)")
    parser.add_argument("--opponent", default=None, help="a policy spec for one seat (self-play)")
    parser.add_argument("--batch", type=int, default=2048, help="env steps per iteration (2048)")
    parser.add_argument("--minibatch", type=int, default=256, help="SGD minibatch (256)")
    parser.add_argument("--epochs", type=int, default=4, help="SGD epochs per iteration (4)")
    parser.add_argument("--env-runners", type=int, default=1, help="sampling actors (1)")
    parser.add_argument("--seed", type=int, default=0, help="seed (0)")
    parser.add_argument("--ray", default=None, metavar="ADDRESS", help="join a Ray cluster")
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local instance")
    parser.add_argument("--eval-opponent", default="random", help="opponent after training")
    parser.add_argument("--eval-games", type=int, default=20, help="evaluation games (20)")
    args = parser.parse_args(argv)
    import ray

    ray.init(
        address=args.ray, num_cpus=None if args.ray else args.num_cpus,
        include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
    )  # fmt: skip
    try:
        config = build_config(
            args.opponent, args.batch, args.minibatch, args.epochs, args.env_runners,
            seed=args.seed,
        )  # fmt: skip
        algo, _ = train(args.iterations, config)
        player = RLlibPolicy(algo.get_module(MODULE_ID))
        result = play_match(player, args.eval_opponent, games=args.eval_games, seed=args.seed)
        print(
            f"{player.name} vs {args.eval_opponent}: score {result.score:.3f} "
            f"(wins {result.wins}, draws {result.draws}, losses {result.losses})"
        )
        algo.stop()
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

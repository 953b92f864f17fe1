"""PPO in one file, in the cleanrl style, on the batched env ``gym.make_vec("ConnectX-v0")``.

Everything is here: the network (a small CNN with a policy head and a value head), the rollout
over ``num_envs`` boards, generalised advantage estimation and the clipped PPO update. Illegal
columns are masked by setting their logits to a large negative number, from the env's
``action_masks()``. The batched env resets a finished board inside ``step`` (Gymnasium's
same-step autoreset), so a ``terminated`` board's next observation is already a new game's
first: the value of the next state is not bootstrapped across it.

    python docs/tutorials/ppo_vector.py                 # the full run (200,000 steps)
    python docs/tutorials/ppo_vector.py --short         # a few seconds, to try it
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import connectx_gym  # noqa: F401 - registers ConnectX-v0 and its batched version
from connectx_gym import Board, Policy, play_match


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=200_000, help="agent moves to train")
    parser.add_argument("--short", action="store_true", help="a few seconds: 8,192 steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--opponent", default="minimax:depth=2~0.5", help="a policy spec")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--num-steps", type=int, default=32, help="rollout length per board")
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--gae-lambda", type=float, default=0.95)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--clip-coef", type=float, default=0.2)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument("--vf-coef", type=float, default=0.5)
    parser.add_argument("--max-grad-norm", type=float, default=0.5)
    parser.add_argument("--games", type=int, default=None, help="games per match (default 98)")
    return parser.parse_args()


class Agent(nn.Module):
    """Two 3x3 convolutions over the ``(2, rows, columns)`` planes, then a policy and a value."""

    def __init__(self, rows: int, columns: int, channels: int = 32, hidden: int = 128) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(2, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(channels * rows * columns, hidden),
            nn.ReLU(),
        )
        self.actor = nn.Linear(hidden, columns)
        self.critic = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.zeros_(self.actor.bias)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.body(obs)).squeeze(-1)

    def get_action_and_value(
        self, obs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden = self.body(obs)
        logits = self.actor(hidden).masked_fill(~mask, -1e8)  # illegal columns: never sampled
        distribution = Categorical(logits=logits)
        if action is None:
            action = distribution.sample()
        value = self.critic(hidden).squeeze(-1)
        return action, distribution.log_prob(action), distribution.entropy(), value


class AgentPolicy(Policy):
    """The agent's most likely legal column, as a connectx-gym ``Policy`` for ``play_match``."""

    name = "ppo_vector"

    def __init__(self, agent: Agent) -> None:
        super().__init__()
        self.agent = agent

    def act(self, board: Board, rng: np.random.Generator) -> int:
        obs = torch.as_tensor(board.to_planes()[None], dtype=torch.float32)
        mask = torch.as_tensor(board.legal_mask()[None])
        with torch.no_grad():
            logits = self.agent.actor(self.agent.body(obs)).masked_fill(~mask, -1e8)
        return int(logits.argmax())


def main() -> dict[str, float]:
    args = parse_args()
    timesteps = 8_192 if args.short else args.timesteps
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    iterations = max(1, timesteps // batch_size)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    start = time.perf_counter()

    envs = gym.make_vec(
        "ConnectX-v0", num_envs=args.num_envs, opponent=args.opponent, opening_plies=2
    )
    rows, columns = envs.single_observation_space.shape[1:]
    agent = Agent(rows, columns)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    before = play_match(AgentPolicy(agent), "random", games=args.games, seed=args.seed).score
    obs = torch.zeros((args.num_steps, args.num_envs, 2, rows, columns))
    masks = torch.zeros((args.num_steps, args.num_envs, columns), dtype=torch.bool)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long)
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    dones = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))

    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
    next_mask = torch.as_tensor(envs.action_masks())
    next_done = torch.zeros(args.num_envs)
    returns_seen: list[float] = []
    losses: list[float] = []

    for iteration in range(1, iterations + 1):
        frac = 1.0 - (iteration - 1.0) / iterations  # learning rate annealed to 0
        optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            obs[step], masks[step], dones[step] = next_obs, next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
            actions[step], logprobs[step], values[step] = action, logprob, value
            next_obs_np, reward, terminated, truncated, _ = envs.step(action.numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            done = np.logical_or(terminated, truncated)
            returns_seen.extend(reward[done].tolist())
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32)
            next_mask = torch.as_tensor(envs.action_masks())
            next_done = torch.as_tensor(done, dtype=torch.float32)

        with torch.no_grad():  # generalised advantage estimation
            next_value = agent.get_value(next_obs)
            advantages = torch.zeros_like(rewards)
            last_gae = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    not_done, following = 1.0 - next_done, next_value
                else:
                    not_done, following = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + args.gamma * following * not_done - values[t]
                last_gae = delta + args.gamma * args.gae_lambda * not_done * last_gae
                advantages[t] = last_gae
            returns = advantages + values

        b_obs, b_masks = obs.reshape(-1, 2, rows, columns), masks.reshape(-1, columns)
        b_actions, b_logprobs = actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        order = np.arange(batch_size)
        rng = np.random.default_rng(args.seed + iteration)
        for _ in range(args.update_epochs):
            rng.shuffle(order)
            for begin in range(0, batch_size, minibatch_size):
                idx = torch.as_tensor(order[begin : begin + minibatch_size])
                _, new_logprob, entropy, new_value = agent.get_action_and_value(
                    b_obs[idx], b_masks[idx], b_actions[idx]
                )
                ratio = (new_logprob - b_logprobs[idx]).exp()
                adv = b_advantages[idx]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((new_value - b_returns[idx]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                losses.append(loss.item())

        if iteration % max(1, iterations // 10) == 0 or iteration == iterations:
            recent = returns_seen[-500:]
            print(
                f"step {iteration * batch_size:>9,}  mean return (last {len(recent)} games) "
                f"{np.mean(recent) if recent else float('nan'):+.3f}  loss {losses[-1]:.4f}"
            )

    train_minutes = (time.perf_counter() - start) / 60
    envs.close()
    policy = AgentPolicy(agent.eval())
    results = {
        name: play_match(policy, name, games=args.games, seed=args.seed)
        for name in ("minimax:depth=2", "random")
    }
    for result in results.values():
        print(result.summary())
    figures = {
        "timesteps": float(iterations * batch_size),
        "train_minutes": train_minutes,
        "final_loss": losses[-1],
        "all_losses_finite": float(np.isfinite(losses).all()),
        "score_vs_minimax2": results["minimax:depth=2"].score,
        "score_vs_random_untrained": before,
        "score_vs_random": results["random"].score,
        "illegal_moves": float(sum(r.illegal_a for r in results.values())),
    }
    print(
        f"{iterations * batch_size} steps in {train_minutes:.1f} min; score vs minimax:depth=2 "
        f"{figures['score_vs_minimax2']:.3f}, vs random {figures['score_vs_random']:.3f} "
        f"(untrained: {before:.3f})"
    )
    return figures


if __name__ == "__main__":
    main()

"""PPO on Ray RLlib with ``connectx train``'s opponents, curriculum, network, weights and report.

The env is :class:`connectx_train.rllib.env.ConnectXMultiAgentEnv`: both seats map to one RLModule,
:class:`connectx_train.rllib.module.ConnectXPPOModule` (the network ``connectx train`` trains), and
each episode plays an opponent drawn from the curriculum's mixture
(:class:`connectx_train.state.Curriculum`, the same ``--opponent`` / ``--curriculum`` specs,
weights, review and self-play shares; ``self`` games have the learner on both seats). After each
training iteration the driver counts the finished games against the current stage, moves the
curriculum on as ``connectx train`` does and hands the new mixture to every env. It plays the
panel every ``--eval-every`` steps, stops in time for the final panel under ``--max-minutes``,
and ends as ``connectx train`` ends: ``final.npz`` (weights only: ``connectx evaluate``,
``connectx accuracy``, ``connectx export-kaggle`` take it), the final panel
(:func:`connectx_train.finish.play_final_panel`) and ``report.md`` / ``report.json`` /
``learning_curves.png`` (:func:`connectx_train.finish.write_report`) in ``--out``.

The flags are ``connectx train``'s for the settings this trainer reads (:data:`RLLIB_SETTINGS`,
same defaults, help and checks) plus RLlib's own (``--env-runners``, ``--ray``, ``--num-cpus``).
``--n-envs`` boards are spread over the env runners; one rollout is ``n_envs * n_steps`` env steps
(each a learner move). Not here: the teacher, checkpoints and ``--resume``, snapshot self-play and
weight averaging. Needs ``pip install -e ".[rllib]"`` (``ray[rllib]``, which pins its own gymnasium:
docs/ray.md)::

    python -m connectx_train.rllib.selfplay --timesteps 20000 --out runs/rllib
    python -m connectx_train.rllib.selfplay --opponent onestep --ray HEAD:6379 --env-runners 8
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

try:
    import ray
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.env_runner import EnvRunner
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f'connectx_train.rllib.selfplay needs RLlib: pip install -e ".[rllib]" ({error})'
    ) from None

from connectx_gym.files import save_weights
from connectx_gym.logs import console
from connectx_gym.ray_executor import RayExecutor
from connectx_train.budget import Budget, minutes
from connectx_train.config import TrainConfig
from connectx_train.config_types import GROUPS, argument_type, declaration
from connectx_train.finish import (
    DIGEST_KEY,
    final_panel_seconds,
    periodic_evaluation,
    play_final_panel,
    timing_summary,
    weights_digest,
    write_report,
)
from connectx_train.rllib.env import AGENTS, ConnectXMultiAgentEnv
from connectx_train.rllib.module import NETWORK_SETTINGS, ConnectXPPOModule, module_weights
from connectx_train.run_setup import describe_device, thread_pools
from connectx_train.state import Curriculum, RunState, SessionClock

__all__ = [
    "MODULE_ID",
    "RLLIB_SETTINGS",
    "build_config",
    "cluster_summary",
    "config_from_args",
    "main",
    "make_parser",
    "train",
]

#: this module's name in full: run as ``python -m`` it is ``__main__``
PROG = "connectx_train.rllib.selfplay"
logger = logging.getLogger(PROG)

#: the one RLModule both seats map to
MODULE_ID = "shared"
#: the settings of :class:`~connectx_train.config.TrainConfig` this trainer reads (its flags)
RLLIB_SETTINGS = (
    *("timesteps", "seed", "out", "max_minutes", "rows", "columns", "inarow"),
    *("opponent", "curriculum", "advance_threshold", "advance_window", "review_weight"),
    *("selfplay_weight", "selfplay_from_stage", "opening_plies"),
    *("n_steps", "batch_size", "n_epochs", "learning_rate", "final_learning_rate", "gamma"),
    *("gae_lambda", "clip_range", "ent_coef", "vf_coef", "max_grad_norm"),
    *NETWORK_SETTINGS,
    *("panel", "eval_every", "eval_games", "final_games", "n_envs", "torch_threads"),
)
#: the other settings as this trainer runs: no teacher, the last weights played
RLLIB_FIXED: dict[str, Any] = {"teacher_positions": 0, "average_weights": 1}
#: finished games per opponent in the training win rates of the learning curves
CURVE_WINDOW = 200


def envs_per_runner(config: TrainConfig, env_runners: int) -> int:
    """``config.n_envs`` boards over ``env_runners`` runners (0: sampling in the driver);
    ``ValueError`` unless they divide evenly."""
    runners = max(env_runners, 1)
    if config.n_envs % runners:
        raise ValueError(
            f"--n-envs {config.n_envs} does not divide over --env-runners {env_runners}: "
            f"give a multiple of {runners}"
        )
    return config.n_envs // runners


def build_config(config: TrainConfig, env_runners: int = 0) -> PPOConfig:
    """RLlib's PPO configuration of a run: one :class:`ConnectXPPOModule` for both seats, the env
    at the curriculum's first stage, PPO's settings mapped from ``config`` (the learning rate
    decays linearly over ``timesteps`` as in ``connectx train``; no KL term, as in SB3)."""
    curriculum = Curriculum.from_config(config)
    env_config = {
        "rows": config.rows,
        "columns": config.columns,
        "inarow": config.inarow,
        "opening_plies": config.training_opening_plies(),
        "mixture": curriculum.mixture(0, selfplay_available=True),
        "seed": config.seed,
    }
    network = {name: getattr(config, name) for name in NETWORK_SETTINGS}
    network["vf_layers"] = list(network["vf_layers"])
    module = RLModuleSpec(module_class=ConnectXPPOModule, model_config=network)
    rollout = config.n_envs * config.n_steps
    return (
        PPOConfig()
        .environment(ConnectXMultiAgentEnv, env_config=env_config)
        .multi_agent(policies={MODULE_ID}, policy_mapping_fn=_to_shared_module)
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={MODULE_ID: module}))
        .env_runners(
            num_env_runners=env_runners,
            num_envs_per_env_runner=envs_per_runner(config, env_runners),
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=rollout,
            minibatch_size=min(config.batch_size, rollout),
            num_epochs=config.n_epochs,
            lr=[[0, config.learning_rate], [config.timesteps, config.final_learning_rate]],
            gamma=config.gamma,
            lambda_=config.gae_lambda,
            clip_param=config.clip_range,
            entropy_coeff=config.ent_coef,
            vf_loss_coeff=config.vf_coef,
            grad_clip=config.max_grad_norm,
            grad_clip_by="global_norm",
            use_kl_loss=False,
        )
        .debugging(seed=config.seed, log_level="ERROR")
    )


def _to_shared_module(agent_id: Any, episode: Any, **kwargs: Any) -> str:
    return MODULE_ID


# The driver's calls into the env runners (module functions: Ray ships them to remote runners).
def _envs(runner: EnvRunner) -> list[ConnectXMultiAgentEnv]:
    env = getattr(runner, "env", None)  # a local runner beside remote ones may have none
    return [] if env is None else [sub.unwrapped for sub in env.envs]


def _drain(runner: EnvRunner) -> list[tuple[str, bool]]:
    return [outcome for env in _envs(runner) for outcome in env.drain()]


def _timing(runner: EnvRunner) -> list[dict[str, Any]]:
    return [env.timing() for env in _envs(runner)]


def _set_mixture(mixture: list[tuple[str, float]], runner: EnvRunner) -> None:
    for env in _envs(runner):
        env.set_mixture(mixture)


def summed_timing(timings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The envs' :meth:`ConnectXMultiAgentEnv.timing`, summed (as
    :func:`connectx_train.opponents.collect_timing` sums SB3's envs)."""
    opponents: dict[str, list[float]] = {}
    for timing in timings:
        for label, (seconds, moves) in timing["opponents"].items():
            entry = opponents.setdefault(label, [0.0, 0])
            entry[0] += seconds
            entry[1] += moves
    return {"env_seconds": sum(t["env_seconds"] for t in timings), "opponents": opponents}


def cluster_summary() -> str:
    """The Ray cluster this process is connected to: its live nodes, CPUs and GPUs."""
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    resources = ray.cluster_resources()
    cpus, gpus = int(resources.get("CPU", 0)), int(resources.get("GPU", 0))
    return f"{nodes} Ray node{'s' if nodes != 1 else ''}, {cpus} CPUs, {gpus} GPUs"


@dataclasses.dataclass
class RLlibRun:
    """One run: its settings, the RLlib algorithm, the curriculum and the run's state."""

    config: TrainConfig
    algo: Algorithm
    curriculum: Curriculum
    state: RunState
    clock: SessionClock
    log: Callable[[str], None]
    env_runners: int = 0
    outcomes: dict[str, deque[float]] = dataclasses.field(default_factory=dict)
    timing: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"rollout_seconds": 0.0, "update_seconds": 0.0}
    )

    def runners(self, call: Callable[[EnvRunner], Any]) -> list[Any]:
        """``call`` on every env runner (the driver's included), the answers in runner order."""
        group = self.algo.env_runner_group
        if group is None:
            raise RuntimeError("the RLlib algorithm has no env runners")
        return list(group.foreach_env_runner(call, local_env_runner=True))

    def weights(self) -> Any:
        module = self.algo.get_module(MODULE_ID)
        if not isinstance(module, ConnectXPPOModule):
            raise TypeError(f"the run's module is {type(module).__name__}, not ConnectXPPOModule")
        return module_weights(module, self.config.geometry)

    def count_games(self) -> None:
        """The games finished since the last call, counted as ``connectx train`` counts them:
        toward the current stage's window (moving on when it passes) and the training win rates;
        a new stage's mixture goes to every env."""
        state, steps = self.state, self.state.timesteps
        stage = state.stage
        for label, won in (item for items in self.runners(_drain) for item in items):
            self.curriculum.record(state, label, won)
            self.outcomes.setdefault(label, deque(maxlen=CURVE_WINDOW)).append(float(won))
            if self.curriculum.maybe_advance(state, steps):
                self.log(f"step {steps:,}: curriculum -> {self.curriculum.labels(state.stage)}")
        if state.stage != stage:
            mixture = self.curriculum.mixture(state.stage, selfplay_available=True)
            self.runners(functools.partial(_set_mixture, mixture))
        point: dict[str, float | int] = {"timestep": steps, "stage": state.stage}
        point |= {label: sum(o) / len(o) for label, o in self.outcomes.items() if o}
        state.train_curve.append(point)

    def evaluate(self) -> None:
        """The periodic panel (``eval_games`` a spec) and dev-split mistake rate, as
        ``connectx train`` plays them, into ``state.evaluations``."""
        periodic_evaluation(self.config, self.weights(), self.state.timesteps, self.state)


def _iteration(run: RLlibRun) -> None:
    """One RLlib iteration (a rollout and PPO's passes over it), its steps and timers."""
    result = run.algo.train()
    runners = result.get("env_runners", {})
    run.state.timesteps = int(runners.get("num_env_steps_sampled_lifetime", 0))
    timers = result.get("timers", {})
    run.timing["rollout_seconds"] += float(timers.get("env_runner_sampling_timer", 0.0))
    run.timing["update_seconds"] += float(timers.get("learner_update_timer", 0.0))


def _keep_panel_time(run: RLlibRun, budget: Budget) -> None:
    """Keep the final panel's time aside in a bounded budget (a few timed games)."""
    if budget.bounded:
        budget.panel_seconds = final_panel_seconds(run.config, run.weights())


def train(
    config: TrainConfig, env_runners: int = 0, log: Callable[[str], None] = logger.info
) -> dict:
    """Train on the Ray instance this process is connected to (``ray.init`` first) and write the
    run's ``final.npz`` and report into ``config.out``; returns the report."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    config.save(out / "config.json")
    curriculum = Curriculum.from_config(config)
    state = RunState()
    curriculum.start(state)
    clock = SessionClock(state)
    budget = Budget.from_minutes(clock, config.max_minutes)
    algo = build_config(config, env_runners).build_algo()
    run = RLlibRun(config, algo, curriculum, state, clock, log, env_runners)
    try:
        # the learner's torch threads (it runs in this process), numpy's BLAS on one
        with thread_pools(config.torch_threads):
            _keep_panel_time(run, budget)
            log(budget.describe(None, None))
            _iterate(run, budget)
            return _finish(run)
    finally:
        algo.stop()


def _iterate(run: RLlibRun, budget: Budget) -> None:
    """PPO's iterations until the steps are done or the budget's PPO deadline comes (leaving
    time for one more iteration as long as the last one), the panel played as it falls due."""
    config, state, clock = run.config, run.state, run.clock
    state.next_eval = config.eval_every
    iteration_seconds = 0.0
    while state.timesteps < config.timesteps:
        if clock.session_seconds() + iteration_seconds > budget.ppo_deadline():
            state.stopped_by_time = True
            return
        started = time.perf_counter()
        _iteration(run)
        run.count_games()
        iteration_seconds = time.perf_counter() - started
        if config.eval_every and state.timesteps >= state.next_eval:
            late = (state.timesteps - state.next_eval) // config.eval_every + 1
            state.next_eval += config.eval_every * late
            run.evaluate()
        rate = state.timesteps / max(clock.session_seconds(), 1e-9)
        line = f"RLlib PPO: step {state.timesteps:,}/{config.timesteps:,}, {rate:.0f} steps/s"
        if budget.bounded:
            left = minutes(budget.ppo_deadline() - clock.session_seconds())
            line += f", stage {state.stage}, {left} left in the budget"
        run.log(line)


def _finish(run: RLlibRun) -> dict[str, Any]:
    """``final.npz``, the final panel and the report, as ``connectx train`` writes them."""
    config, state, clock, env_runners = run.config, run.state, run.clock, run.env_runners
    out = Path(config.out)
    weights = run.weights()
    save_weights(weights, out / "final.npz")
    timing = {**summed_timing([t for ts in run.runners(_timing) for t in ts]), **run.timing}
    clock.update()
    run.log(f"trained {state.timesteps:,} steps in {state.wall_seconds / 60:.1f} min; final panel")
    panel = play_final_panel(config, weights, run.log)
    clock.update()
    wall = state.wall_seconds
    training_seconds = max(wall - state.eval_seconds - panel["seconds"], 1e-9)
    runners = max(env_runners, 1)
    report = {
        "config": config.to_json(),
        DIGEST_KEY: weights_digest(out / "final.npz"),
        "trainer": f"Ray RLlib {ray.__version__} PPO (python -m {PROG}), "
        f"{env_runners} env runners, on {cluster_summary()}",
        "envs": f"{config.n_envs} envs ({runners} x {config.n_envs // runners} on RLlib's "
        f"{'driver' if env_runners == 0 else 'env runners'}; agents {', '.join(AGENTS)})",
        "tensorboard": False,
        "bf16": False,
        "device": describe_device("cpu"),
        "precision_reason": "RLlib's learner computes in float32",
        "timesteps": state.timesteps,
        "stopped_by_time_limit": state.stopped_by_time,
        "wall_seconds": wall,
        "training_seconds": training_seconds,
        "teacher_seconds": 0.0,
        "periodic_eval_seconds": state.eval_seconds,
        "final_eval_seconds": panel["seconds"],
        "steps_per_second": state.timesteps / training_seconds,
        "averaged_snapshots": [],
        "curriculum": state.curriculum_history,
        "final_stage": state.stage,
        "panel": panel["results"],
        "perfect_play": panel["perfect_play"],
        "evaluations": state.evaluations,
        "train_curve": state.train_curve,
        "timing": timing_summary(timing, clock.session_seconds(), state.timesteps),
    }
    write_report(report, out)
    run.log(f"report: {out / 'report.md'}")
    return report


def make_parser() -> argparse.ArgumentParser:
    """The flags: ``connectx train``'s for :data:`RLLIB_SETTINGS` (their declarations' help,
    types and bounds) and RLlib's own."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = {title: parser.add_argument_group(title) for title in GROUPS}
    defaults = TrainConfig(**RLLIB_FIXED)
    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    for name in RLLIB_SETTINGS:
        declared, default = declaration(fields[name]), getattr(defaults, name)
        shown = declared.default_text or (
            " ".join(map(str, default)) if isinstance(default, tuple) else default
        )
        options: dict[str, Any] = {
            "default": None,
            "type": argument_type(name, str(fields[name].type), declared),
            "metavar": declared.metavar,
            "help": f"{declared.help} (default: {shown})",
        }
        if declared.repeatable:
            options |= {"action": "append", "help": declared.help}
        elif isinstance(default, tuple):
            options["nargs"] = "*"
        groups[declared.group].add_argument("--" + name.replace("_", "-"), **options)
    rllib = parser.add_argument_group("RLlib")
    rllib.add_argument(
        "--env-runners", type=int, default=0, help="RLlib env runners (Ray actors, one CPU "
        "each) sampling the envs; 0: the driver samples them (default: 0)",
    )  # fmt: skip
    rllib.add_argument(
        "--ray", default=None, metavar="ADDRESS",
        help="join this Ray cluster (HOST:PORT, auto); default: start Ray on this machine",
    )  # fmt: skip
    rllib.add_argument(
        "--num-cpus", type=int, default=None, help="CPUs of the Ray instance started here"
    )
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's settings: ``connectx train``'s defaults with :data:`RLLIB_FIXED`, the flags
    given over them, validated as ``connectx train`` validates them."""
    given = {name: getattr(args, name) for name in RLLIB_SETTINGS}
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items() if v is not None}
    config = TrainConfig(**{**RLLIB_FIXED, **given})
    config.validate()
    return config


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    # RLlib's notice that PPO runs on its new API stack, on every start: not the user's concern
    logging.getLogger("ray.rllib").setLevel(logging.ERROR)
    try:
        config = config_from_args(args)
        envs_per_runner(config, args.env_runners)
    except ValueError as error:
        parser.error(str(error))
    if args.env_runners < 0 or (args.num_cpus is not None and args.num_cpus < 1):
        parser.error("--env-runners must be >= 0 and --num-cpus >= 1")
    try:
        # starts a local instance (stopped on leaving) or joins --ray, in one-line errors
        executor = RayExecutor(address=args.ray, num_cpus=args.num_cpus)
    except (ConnectionError, ValueError) as error:
        ray.shutdown()  # what a failed start left running
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    with executor, console():  # the progress lines on stderr, as connectx train's
        try:
            train(config, args.env_runners)
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

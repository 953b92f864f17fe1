"""Training and export of ConnectX agents: MaskablePPO with a curriculum and self-play.

Needs the ``train`` extra (``pip install "connectx-gym[train]"``: torch, stable-baselines3,
sb3-contrib, TensorBoard, matplotlib). Entry points: :func:`connectx_train.trainer.train`
(``connectx train``) and :func:`connectx_train.export.export_kaggle` (``connectx export-kaggle``).

One concern per module:

- ``config``: :class:`TrainConfig`, every hyper-parameter, also as ``--flags`` (no torch);
- ``state``: ``RunState``, the run's progress, exactly what ``state.json`` stores (no torch);
- ``curriculum``: the opponent stages and when to move on (no SB3);
- ``opponents``: the vectorised envs, their opponent slots and timings;
- ``batched``: the same slots on one batched env (``--vec-env batched``); ``vec_env``: the
  batched env as an SB3 ``VecEnv``;
- ``model``: building, saving and loading the MaskablePPO model; weights; panel evaluation;
- ``callbacks``: one SB3 callback per job (curriculum, self-play pool, panel, checkpoints,
  time limit), sharing one ``RunState``;
- ``finish``: the final phase (final models, final panel, report), safe to repeat;
- ``resume_extras``: what a checkpoint keeps beside the model and state (the random streams SB3
  draws from, the teacher replay's optimizer), so ``--resume`` goes on with them;
- ``rllib_selfplay``: multi-agent PPO on Ray RLlib over the PettingZoo adapter (the ``rllib``
  extra; never imported by the rest);
- ``sb3_without_gym``: SB3 imported without the unmaintained ``gym`` (no banner on stderr);
- ``trainer``: ``train()``, read top to bottom; ``report``, ``networks``, ``export``,
  ``sb3_files`` and ``commands/`` (the ``connectx`` subcommands).
"""

from connectx_train import sb3_without_gym

sb3_without_gym.install()  # before any module imports SB3: no gym banner on stderr

from connectx_train.config import TrainConfig  # noqa: E402

__all__ = ["TrainConfig"]

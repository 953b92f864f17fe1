"""Training and export of ConnectX agents: MaskablePPO with a curriculum and self-play.

Needs the ``train`` extra (``pip install "connectx-gym[train]"``: torch, stable-baselines3,
sb3-contrib, TensorBoard, matplotlib). Entry points: :func:`connectx_train.trainer.train`
(``connectx train``) and :func:`connectx_train.export.export_kaggle` (``connectx export-kaggle``).

One concern per module. A run, read top to bottom:

- ``trainer``: ``train()``, the whole run: setup, teaching, PPO's loop (MaskablePPO's
  ``collect_rollouts`` and ``train``), the final phase;
- ``run_setup``: device, number format, threads and budget resolved once into one ``RunSetup``;
  the run lock; stop signals;
- ``teaching``: the teacher sized to the run, planned within the budget, taught, and replayed
  during PPO (``teacher``: the labelled positions and the supervised passes);
- ``opponents``: the envs, their opponent slots (also on one batched env), self-play snapshots;
- ``model``: the MaskablePPO model, its checkpoints and their extras, weights, panel evaluation;
- ``finish``: final weights (with averaging), the final panel and the report, safe to repeat.

Beside them: ``config`` (settings, no torch) with ``config_types`` (what a setting declares, the
help groups, the mixture and book lists), ``config_cli`` (the flags and ``--help`` text) and
``presets``; ``state`` (``RunState``: what ``state.json`` stores, and the curriculum's rules; no
SB3), ``budget`` (one time bound over the phases, their progress lines), ``teacher``,
``networks`` (the policy network; weights-only descriptions from it and run in torch),
``vec_env`` (the batched env as an SB3 ``VecEnv``), ``learning_curves``, ``export`` (Kaggle: a
network or a search) and ``onnx_export``, ``ray_rollouts`` and ``env_slices`` (``--ray``'s
rollouts), ``rllib/`` (RLlib's trainer: the ``rllib`` extra; never imported by the rest),
``sb3_files`` (SB3 and torch files, SB3 imported without the unmaintained ``gym``) and
``commands/`` (the ``connectx`` subcommands).
"""

from connectx_train import sb3_files

sb3_files.install_without_gym()  # before any module imports SB3: no gym banner on stderr

from connectx_train.config import TrainConfig  # noqa: E402

__all__ = ["TrainConfig"]

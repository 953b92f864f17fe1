"""RLlib's self-play trainer: PPO on Ray RLlib with ``connectx train``'s opponents, curriculum,
network, report and ``final.npz``.

- ``env``: ConnectX as an RLlib ``MultiAgentEnv`` playing the curriculum's opponents;
- ``module``: the project's network as an RLlib PPO module, and its weights-only export;
- ``selfplay``: the trainer, run as ``python -m connectx_train.rllib.selfplay``.

Needs the ``rllib`` extra (``pip install -e ".[rllib]"``). Nothing is imported here, so that
importing this package does not import RLlib; the rest of ``connectx_train`` never imports it.
"""

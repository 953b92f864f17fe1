"""Training and export of ConnectX agents: MaskablePPO with a curriculum and self-play.

Needs the ``train`` extra (``pip install "connectx-gym[train]"``: torch, stable-baselines3,
sb3-contrib, TensorBoard, matplotlib). Entry points: :func:`train.trainer.train` (``connectx
train``) and :func:`train.export.export_kaggle` (``connectx export-kaggle``).
"""

from train.config import TrainConfig

__all__ = ["TrainConfig"]

"""Attention Lab core: TinyCharLM, its task, training, checkpoints and analysis (no streamlit here)."""
from .checkpoints import CheckpointError, load_checkpoint, read_checkpoint, save_checkpoint
from .model import ModelConfig, TinyCharLM
from .task import TaskConfig, sample_batch

__all__ = ["CheckpointError", "ModelConfig", "TaskConfig", "TinyCharLM", "load_checkpoint",
           "read_checkpoint", "sample_batch", "save_checkpoint"]

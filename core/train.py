"""`python -m core.train`: train TinyCharLM and write a checkpoint (the code is core.training.train)."""
import sys

from core.model.cli import run_main
from core.training.train import main

if __name__ == "__main__":
    sys.exit(run_main("python -m core.train", main))

"""`python -m core.patch`: activation patching of each head (the code is core.causal.patch_report)."""
import sys

from core.causal.patch_report import main
from core.model.cli import run_main

if __name__ == "__main__":
    sys.exit(run_main("python -m core.patch", main))

"""`python -m core.sweep`: a grid of trainings on local processes or Ray, into one resumable results
table (the code is core.sweeps.run)."""
import sys

from core.model.cli import run_main
from core.sweeps.run import main

if __name__ == "__main__":
    sys.exit(run_main("python -m core.sweep", main))

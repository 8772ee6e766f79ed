"""`python -m core.report`: measure a checkpoint's heads and copy metrics (the code is core.reading.report)."""
import sys

from core.model.cli import run_main
from core.reading.report import main

if __name__ == "__main__":
    sys.exit(run_main("python -m core.report", main))

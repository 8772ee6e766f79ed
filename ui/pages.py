"""The lab's pages, in the order a student walks them: the one list that dashboard.py's navigation
and home-page path, the tests and the benches read. No streamlit here, so anything can import it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabPage:
    file: str | None  # the page's script; None for Home, which dashboard.py draws itself
    title: str
    icon: str
    what: str = ""  # what the student does there (the home page's path)

    @property
    def url_path(self) -> str:
        """The page's address below the app's root ("" for Home), as st.navigation derives it."""
        return "" if self.file is None else self.file.rsplit("/", 1)[-1].removesuffix(".py")

    @property
    def name(self) -> str:
        """A short id: "home" or the page file's stem."""
        return self.url_path or "home"


HOME = LabPage(None, "Home", "🏠")
PATH = (  # every page but Home, in the order of the path through the lab
    LabPage("pages/train.py", "Train", "🏋️",
            "Train a model live and watch the later-copy loss fall while a previous-token head and induction heads "
            "form."),
    LabPage("pages/attention.py", "Attention", "👀",
            "Look at the attention patterns of the picked model, head by head, on sequences you choose."),
    LabPage("pages/circuits.py", "Circuits & ablations", "🔌",
            "Read the QK and OV circuits straight from the weights, and knock heads out to see what breaks."),
    LabPage("pages/depth.py", "What depth can express", "🧱",
            "Compare 0, 1 and 2 blocks: bigram statistics, skip-trigrams, and the two-step induction circuit."),
    LabPage("pages/icl.py", "In-context learning", "🔁",
            "Feed never-seen patterns and watch the model copy them after a single exposure."),
    LabPage("pages/archetypes.py", "Head archetypes & IOI", "🧭",
            "Meet the head types known from GPT-2 small and the circuit behind indirect-object identification."),
    LabPage("pages/causal.py", "Causal experiments", "🧪",
            "Patch clean activations into a corrupted run, path by path, and read the stream through the logit lens."),
    LabPage("pages/exercises.py", "Exercises", "✍️",
            "Write the lab's computations yourself; each check runs your function on the picked model and says what "
            "is wrong."),
)
ALL_PAGES = (HOME, *PATH)

"""The lab's pages, in the order a student walks them: the one list that dashboard.py's navigation
and home-page path, the tests and the benches read. No streamlit here, so anything can import it.

The page files live in app_pages/, a folder neither Streamlit (which treats a `pages/` folder beside
the entry script as an old-style multipage app) nor Python treats specially; no file there is named
like a package of the repository (the Exercises page is exercise_page.py, beside the `exercises`
package), so running one as a file imports what it means to."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabPage:
    file: str  # the page's script, relative to the repository root (AppTest.switch_page takes it too)
    url_path: str  # the page's address below the app's root ("" for Home), what links and the tests use
    title: str
    icon: str
    what: str = ""  # what the student does there (the home page's path)
    heading: str = ""  # the page's title, written by the shell (dashboard.py) above the page
    reads_qk: str = ""  # what the page reads from W_Q and W_K as if each key came from its own position alone
    # (the page is not run for a model with smeared keys: ui.task_pages)

    @property
    def name(self) -> str:
        """A short id: "home" or the url path."""
        return self.url_path or "home"


HOME = LabPage("app_pages/home.py", "", "Home", "🏠", heading="Attention Lab")
PATH = (  # every page but Home, in the order of the path through the lab
    LabPage("app_pages/train.py", "train", "Train", "🏋️",
            "Train a model live and watch the later-copy loss fall while a previous-token head and induction heads "
            "form.", heading="Train TinyCharLM"),
    LabPage("app_pages/attention.py", "attention", "Attention", "👀",
            "Look at the attention patterns of the picked model, head by head, on sequences you choose.",
            heading="Attention patterns"),
    LabPage("app_pages/circuits.py", "circuits", "Circuits & ablations", "🔌",
            "Read the QK and OV circuits straight from the weights, and knock heads out to see what breaks.",
            heading="Circuits & ablations", reads_qk="the QK circuits and composition scores"),
    LabPage("app_pages/depth.py", "depth", "What depth can express", "🧱",
            "Compare 0, 1 and 2 blocks: bigram statistics, skip-trigrams, and the two-step induction circuit.",
            heading="What depth can express", reads_qk="its skip-trigrams and path terms' QK scores"),
    LabPage("app_pages/icl.py", "icl", "In-context learning", "🔁",
            "Feed never-seen patterns and watch the model copy them after a single exposure.",
            heading="In-context learning in miniature"),
    LabPage("app_pages/archetypes.py", "archetypes", "Head archetypes & IOI", "🧭",
            "Meet the head types known from GPT-2 small and the circuit behind indirect-object identification.",
            heading="Head archetypes & the IOI circuit"),
    LabPage("app_pages/causal.py", "causal", "Causal experiments", "🧪",
            "Patch clean activations into a corrupted run, path by path, and read the stream through the logit lens.",
            heading="Causal experiments"),
    LabPage("app_pages/laws.py", "laws", "Laws of the drop", "📈",
            "See how the drop moves with context, batch and vocabulary over many seeds, beside the published "
            "predictions.", heading="Laws of the drop"),
    LabPage("app_pages/exercise_page.py", "exercises", "Exercises", "✍️",
            "Write the lab's computations yourself; each check runs your function on the picked model and says what "
            "is wrong.", heading="Exercises that check themselves"),
)
GLOSSARY = LabPage("app_pages/glossary.py", "glossary", "Glossary", "📖", heading="Glossary")  # not on the path:
# every page links its terms here (ui/glossary.link)
ALL_PAGES = (HOME, *PATH, GLOSSARY)

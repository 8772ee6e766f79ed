"""Attention Lab: entry point. `streamlit run dashboard.py`

The thin shell every page runs in: the server's setup, the navigation over ui/pages.py's list, the
sidebar model picker shared by every page, and what wraps each page's run (a shared link's settings
first; the page's title, and whether the picked model's task gets the page (ui/task_pages.py); the notebook
download and the address after). The pages are the files in app_pages/.
"""
import streamlit as st

from ui import glossary, layout, notebook, python_panel, share, task_pages
from ui.charts import export
from ui.pages import ALL_PAGES, GLOSSARY, HOME
from ui.setup import lab_script, script_ended
from ui.state import sidebar_picker

st.set_page_config(page_title="Attention Lab", page_icon="🔎", layout="wide")
lab_script()

page = st.navigation([st.Page(p.file, title=p.title, icon=p.icon, default=True) if p is HOME else
                      st.Page(p.file, title=p.title, icon=p.icon, url_path=p.url_path) for p in ALL_PAGES])
share.apply_link(page.url_path)  # a shared link's settings, before any widget is drawn
entry = sidebar_picker()
layout.fit_charts()  # every chart stays inside its column, at any width
python_panel.begin_run()
lab_page = next(p for p in ALL_PAGES if p.url_path == page.url_path)
export.begin_run(lab_page.name, entry.label if entry is not None else None)  # what figures are named after
try:
    st.title(lab_page.heading)
    glossary.begin_run()
    if lab_page is GLOSSARY or task_pages.page_runs(lab_page, entry):  # the glossary is for every model
        page.run()
        notebook.download_button(page.title, page.url_path)
        glossary.terms_panel()
finally:  # also after st.stop(): the address bar always holds the view on screen
    share.publish(page.url_path)
    script_ended()

"""Layer 6, the book: execute the notebooks and render the Jupyter Book (``pages``), and read the rendered pages
in headless Chromium (``browser``). ``python -m mrtpo.book build|check``.

May import every layer below.
"""

from mrtpo.book.pages import build, check, execute, notebook_plan

__all__ = ["build", "check", "execute", "notebook_plan"]

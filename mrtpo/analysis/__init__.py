"""Layer 5, analysis: what the run folders show — statistics (``stats``, ``significance``, ``multiplicity``), the
book's comparisons and verdicts (``evidence``, ``claims``, ``headline``, ``power_analysis``, ``beta_sweep``,
``dose_response``, ``open_questions``, ``localisation``, ``positive_control``), the measurements of a policy's profiles
(``diagnostics``, ``diagnose``), a real model's untrained and trained figures (``untrained``, ``trained``), tables
against the paper (``report``) and figures (``plots``).

May import every layer below (``files``, ``method``, ``tasks``, ``models``, ``runs``); notebooks import it.
"""

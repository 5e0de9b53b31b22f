# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # MRTPO, reproduced
#
# *Each reward to its relevant tokens* (Zhai et al., arXiv 2610.21439) proposes **MRTPO**: in multi-reward
# reinforcement learning of language models, give each reward's advantage mainly to the tokens that reward is
# about, instead of giving every token of a response the same advantage.
#
# This book is the reference reproduction. Every page is a notebook executed by papermill from the `mrtpo`
# package in this repository; every reproduced number comes from a run folder under `results/` that the
# committed code produced. The paper's own numbers are kept as data (`results/paper/`) and shown beside ours.

# %% tags=["parameters"]
model = "tiny"  # whose runs the verdicts read: the book's scale; nothing is trained on this page

# %% [markdown]
# ## What was reproduced
#
# Each of the paper's headline claims, measured on this repository's finished runs at the tiny scale (a
# ~2M-parameter policy on synthetic tasks, not the paper's 1.5B–7B models on real benchmarks), with a 95%
# interval: for a difference between methods, a paired bootstrap over the seeds both methods share (and over
# the evaluation prompts where the run folders hold per-prompt results), widened to the paired t interval over
# the seeds where that is wider (`stats.paired_difference`); for localisation, a bootstrap over the
# saved profiles. A claim is *reproduced* when the whole interval lies on the claimed side of no effect and
# reaches the paper's size, *weaker than claimed* when it lies on that side but short of the paper's size,
# *contradicted* when it lies on the other side, *not reproduced* when it holds no effect but excludes the
# paper's size, and *inconclusive* otherwise — including every difference resting on one shared seed, which has
# no interval. Computed on this page from the run folders and `results/paper/`; each row links to the page with
# the full table, its seeds and its power.

# %% tags=["remove-input"]
from IPython.display import HTML

from mrtpo import claims, plots

verdicts = claims.verdicts(model)
shown = verdicts.assign(claim=[f'<a href="{p}.html">{c}</a> ({s})' for c, p, s in
                               zip(verdicts["claim"], verdicts["page"], verdicts["source"])])
display(HTML(shown[["claim", "paper", "ours", "verdict"]].to_html(index=False, escape=False, justify="left")))

# %% tags=["remove-input"]
fig = plots.verdict_chart(verdicts)
plots.save(fig, f"verdicts_{model}")

# %% [markdown]
# The tiny policies were warmed up to read their Z blocks (see *The embedded tiny policies*), so where the
# mechanism shows at this scale it is partly designed; where it does not, the paper's models may still
# behave differently. The chapters below give every number with its seeds and standard errors.
#
# ```{tableofcontents}
# ```

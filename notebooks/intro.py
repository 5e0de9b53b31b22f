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
# interval. For a difference between methods: the paired t interval over the seeds both methods share
# (`stats.paired_difference`; every run is scored on the same evaluation prompts, so the seeds and the sampling of
# responses within each prompt are all that varies between runs), and the paired t-test's p, adjusted for the
# book's whole family of comparisons (below). For localisation: a bootstrap over the seeds, each seed's saved
# profiles resampled together. A claim is *reproduced* when the whole interval lies on the claimed side of no
# effect and reaches the paper's size, *weaker than claimed* when it lies on that side but short of the paper's
# size, *contradicted* when it lies on the other side — for a difference between methods, each only when its
# Holm-adjusted p is below 0.05 as well — *not reproduced* when it excludes the paper's size without being a gap,
# and *inconclusive* otherwise: "not distinguishable at this power", with the difference the seeds would detect
# with 80% power, which is no evidence of no difference; a difference resting on one shared seed has no test.
# Computed on this page from the run folders and `results/paper/`; each row links to the page with the full
# table, its seeds and its power.

# %% tags=["remove-input"]
from IPython.display import HTML

from mrtpo.analysis import headline, multiplicity, plots

family = multiplicity.book_family(model)
verdicts = headline.verdicts(model, family)
shown = verdicts.assign(claim=[f'<a href="{p}.html">{c}</a> ({s})' for c, p, s in
                               zip(verdicts["claim"], verdicts["page"], verdicts["source"])])
display(HTML(shown[["claim", "paper", "ours", "verdict"]].to_html(index=False, escape=False, justify="left")))

# %% tags=["remove-input"]
fig = plots.verdict_chart(verdicts)
plots.save(fig, f"verdicts_{model}")

# %% [markdown]
# ## The family of comparisons, and its correction
#
# The book reports many comparisons between methods: every distinct (task, A − B) of the result pages' verdict
# tables (`evidence.BOOK_COMPARISONS`; a pair shown on two pages counts once). Tested one by one at 0.05, about one
# in twenty of them would show a gap by chance alone. So they are one family: each is tested by a two-sided paired
# t-test over the seeds both arms share (the p below is that test's, on the held-out answer metric at temperature
# 1), the family's p are adjusted by Holm's step-down method (`significance.holm`: the chance of even one false gap
# in the family stays at or below 0.05, whatever the dependence between comparisons), and a difference is a gap
# only when its adjusted p is below 0.05. A comparison on one shared seed has no test and is not counted. The two
# "detectable" columns give the difference each comparison would detect with 80% power at its seeds and measured
# sd (noncentral t): at 0.05 alone, and at 0.05 / m, where Holm's first step tests. That sd is measured over the
# shared seeds with n − 1 degrees of freedom (2 at 3 seeds, where its 95% interval runs from about half to six
# times the measured value), so each detectable size is as uncertain; the reproduce page gives every sd's interval
# and the power at its ends. Every result page uses these adjusted p.

# %% tags=["remove-input"]
display(multiplicity.family_view(family).set_index(["task", "comparison"]))
print(multiplicity.family_sentence(family))

# %% [markdown]
# ## Can placement help at all? (the positive control)
#
# A null for MRTPO − GDPO says nothing about MRTPO unless placing the advantage could help at all. The `region`
# arm places each reward's advantage on the tokens its verifier reads (its check region), the placement MRTPO's
# relevance is meant to find, through MRTPO's own weights, bound and scaling; trained from the same base on the same
# seeds, it bounds what placement buys at this scale. Per task: region − GDPO (paired t over the shared seeds, Holm
# over the tasks: a family of its own, outside the one above; for a real model, on each real benchmark with the
# adjusted p of Table 2's trained section, so one comparison has one verdict), and the share of that gain MRTPO
# captures, (MRTPO − GDPO) / (region − GDPO), with a bootstrap interval over the seeds — undefined where
# region − GDPO is not a gap.

# %% tags=["remove-input"]
from mrtpo.analysis import positive_control

control = positive_control.positive_control(model=model)
display(positive_control.view(control).set_index(["task", "benchmark", "question"]))

# %% [markdown]
# The tiny policies were warmed up to read their Z blocks (see *The embedded tiny policies*), so where the
# mechanism shows at this scale it is partly designed; where it does not, the paper's models may still
# behave differently. The chapters below give every number with its seeds and standard errors.
#
# ```{tableofcontents}
# ```

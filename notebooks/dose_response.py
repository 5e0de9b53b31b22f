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
# # Does localisation buy gain? The dose-response
#
# MRTPO's premise is that leaving verifier k's information out of the prompt moves the policy mainly where
# verifier k reads, so that reward k's advantage can be put on those tokens. The paper could only measure that
# localisation on its models; it could not vary it. This page varies it twice. First, **the placement dial at one
# base**: the advantage is placed by q_λ = (1 − λ) q/q̄ + λ m/m̄, from MRTPO's relevance q (λ = 0) to the indicator
# m of the tokens the verifier reads (λ = 1, the positive control's `region` arm), everything else fixed
# (`MRTPOConfig.region_blend`), so that the gain is set against placement quality alone. Second, the testbed's
# dial, which varies the base and with it the base's quality. Its **dial** (`recipe.dial_recipe`)
# builds one base per setting, the rate at which the warm-up corrupts region k when block k is absent, with
# everything else fixed, so that the measured check-region ratio moves from about 1 (no mechanism) upwards.
#
# The experiment: GDPO and MRTPO trained on each setting's base (`mrtpo train --dial <setting>`, the same seeds
# for both arms), and each setting's gain, MRTPO − GDPO on the held-out answer metric with a 95% paired t interval
# over the shared seeds, set against the
# localisation measured on that base (`benchmarks/tiny_models.py --dial`: the check-region ratio of the rewards
# whose region holds at most half the tokens, and the concentration, the share of tokens holding 80% of the
# shift). If better localisation buys more gain, the gain rises with the ratio. `mrtpo.analysis.dose_response` documents
# every definition. The dial is not a clean dose of localisation: corrupting a region more often also makes the
# base worse at what that region holds, so the base's own reward falls as the dose rises (the table's "base
# reward": the first batch of every run at the setting, sampled before any update). The gain at each setting is
# measured from a base of a different quality, and the slope cannot isolate the placement of the advantage from
# it. This page trains nothing: the runs come from `benchmarks/book_runs.sh` (sections "positive control" and
# "dose-response"), and the testbed dial's runs still missing are listed at the end.

# %% tags=["parameters"]
model = "tiny"  # whose runs the page reads (the dial bases are tiny bases); nothing is trained on this page
tasks = ["sql", "if"]  # the tasks for the dose-response (at least text-to-SQL and instruction following)
seeds = [0, 1, 2]  # the design's seeds per arm and setting (benchmarks/book_runs.py --seeds): the missing ones are listed
steps = None  # None: the registry's steps

# %%
import pandas as pd
from IPython.display import Markdown

from mrtpo.analysis import dose_response, evidence, plots, positive_control, report
from mrtpo.models.recipe import DIAL_SETTINGS

_, dial = report.tiny_models()  # the dial rows of results/tiny_models.csv
localisation = dose_response.setting_localisation(dial)

# %% [markdown]
# ## Gain against placement quality at a fixed base
#
# Per setting λ of the placement dial, on the default base of each task: the placed arm − GDPO on the held-out
# answer metric, with its 95% paired t interval over the seeds both share, against the check-region ratio of the
# placement the weights used (PAPER.md §7; for λ > 0 the trainer logs it every step, over the pairs whose advantage
# varies; MRTPO at λ = 0 reads no region while training, so its ratio is that of the shift in its saved profiles).
# The line is the least-squares slope over the settings with at least two shared seeds. Every setting starts from
# the same base and samples the same first batch for a seed, so, unlike the testbed's dial below, nothing but the
# placement moves along this axis. The runs come from `benchmarks/book_runs.sh --section 'positive control'`.

# %%
placed = {task: positive_control.placement_dial(task, model) for task in tasks}
fig = plots.dose_response(pd.concat([r.table for r in placed.values()], ignore_index=True),
                          {t: r.slopes for t, r in placed.items()}, {t: report.answer_metric(t) for t in tasks}, kind="blend")
plots.save(fig, f"placement_dial_{model}")

# %%
for task, result in placed.items():
    t = result.table
    view = t[["setting", "ratio", "ratio measured on", "placed seeds", "gdpo seeds", "interval over"]].copy()
    view.insert(2, "placed − GDPO (95% interval)", [evidence.interval_text(g, lo, hi) for g, lo, hi in zip(t["gain"], t["lo"], t["hi"])])
    display(Markdown(f"### {task}\n\n{result.verdict}"))
    display(view.rename(columns={"setting": "λ", "ratio": "check-region ratio"}).set_index("λ").round(3))

# %% [markdown]
# ## The testbed's dial: a base per setting

# %% [markdown]
# ### The dial's measured localisation
#
# Per setting of each task's dial, as `benchmarks/tiny_models.py --dial` measured it on the dial base (sampled
# held-out responses at temperature 1, replayed leave-one-out): the check-region ratio (1 = no better than
# uniform; the rewards it averages are listed), the mean share of tokens holding 80% of a reward's shift and the
# concentration it gives (Fig. 6's "3x"). The tiny-models page shows every figure of these bases.

# %%
for task in tasks:
    rows = localisation[localisation["task"] == task]
    display(Markdown(f"### {task}"))
    if rows.empty:
        display(Markdown(f"`results/tiny_models.csv` has no dial rows for `{task}` yet: its dial bases have not been "
                         f"measured (`python benchmarks/tiny_models.py --tasks {task} --dial`)."))
        continue
    display(rows.drop(columns="task").set_index("setting").round(3)
            .rename(columns={"ratio": "check-region ratio", "ratio_rewards": "rewards in the ratio",
                             "concentration80": "tokens holding 80%", "concentration_x": "concentration (x)"}))

# %% [markdown]
# ### Gain against localisation
#
# Each point is one dial setting: MRTPO − GDPO with its 95% paired interval, at the setting's measured ratio,
# labelled with its concentration. A dotted line marks a setting whose runs do not exist yet. The line is the
# least-squares slope over the settings with at least two shared seeds; its interval comes from a bootstrap over
# seeds (resampled jointly across settings), widened to the slope's normal interval from the points' own intervals
# where that is wider. The ratio averages only the rewards whose check
# region holds at most half of the tokens (the table's "rewards in the ratio"); where the answer metric's own
# rewards are not among them (text-to-SQL's execution match reads most of the query), the dial moves the
# localisation of other rewards than the one the gain is measured on, and the figure tests the premise only
# indirectly.

# %%
runs = {task: dose_response.dial_runs(task, DIAL_SETTINGS, model, steps) for task in tasks}  # finished ones only
results = {task: dose_response.analyse(task, dial, runs[task]) for task in tasks}
table = pd.concat([r.table for r in results.values()], ignore_index=True)
fig = plots.dose_response(table, {t: r.slopes for t, r in results.items()},
                          {t: report.answer_metric(t) for t in tasks})
plots.save(fig, f"dose_response_{model}")

# %% [markdown]
# ### Verdicts
#
# Per task: the gains per setting (a gain only when its interval excludes 0), the slope of the gain on the ratio
# and on the concentration, and the verdict. "Rule of thumb" is the reader's rule behind `mrtpo diagnose`: below 3x
# concentration and 2x ratio, expect about half a point from MRTPO; at such a setting it did not hold when the
# gain's interval lies wholly above half a point. An interval that holds half a point confirms nothing: the runs
# cannot tell the gain from it, and the table gives the difference they would detect with 80% power instead.

# %%
for task, result in results.items():
    display(Markdown(f"### {task}\n\n{result.verdict} {dose_response.rule_sentence(result.table)}"))
    t = result.table
    view = t[["setting", "base reward", "ratio", "concentration_x", "mrtpo seeds", "gdpo seeds", "interval over",
              "rule of thumb"]].copy()
    view.insert(4, "MRTPO − GDPO (95% interval)", [evidence.interval_text(g, lo, hi) for g, lo, hi in zip(t["gain"], t["lo"], t["hi"])])
    display(view.rename(columns={"ratio": "check-region ratio", "concentration_x": "concentration (x)"})
            .set_index("setting").round(3))
    slopes = result.slopes.assign(**{"slope (95% interval)": [evidence.interval_text(s, lo, hi)
                                                              for s, lo, hi in zip(result.slopes["slope"], result.slopes["lo"], result.slopes["hi"])]})
    display(slopes[["against", "slope (95% interval)", "points", "settings"]].set_index("against"))

# %% [markdown]
# ### Runs still missing
#
# The design is GDPO and MRTPO at every setting with the seeds above. A setting without runs, or with fewer than
# two shared seeds, cannot enter the verdict; `benchmarks/book_runs.sh` trains the missing runs in the order of
# `benchmarks/book_runs.py` (a dial base is built by its first run).

# %%
for task in tasks:
    missing = dose_response.missing_runs(task, runs[task], seeds, model, steps)
    planned = sum(len(arms) for arms in runs[task].values()) * len(seeds)
    display(Markdown(f"**{task}**: {planned - len(missing)} of the {planned} planned runs are finished"
                     + (f"; missing: {len(missing)}." if len(missing) else ".")))
    if len(missing):
        display(missing.groupby(["setting", "method"])["seed"].agg(lambda s: evidence.seeds_text(sorted(s)))
                .rename("missing seeds").unstack("method").fillna("none"))

# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # What the replay costs
#
# MRTPO adds one forward of P_all per replayed response and one of P_\\k per reward whose group varied; the
# paper states +10% to +20% step time. On a CPU that ratio is not the yardstick (generation is cheap here and every
# forward is compute-bound): the replay cannot cost less than one no-grad forward per replayed row over
# prompt + Z + response. Below: the step-cost benchmark (`benchmarks/step_cost.py`: the runner's tiny configuration,
# every arm stepping in turn) split by phase and set against that limit; the wall time of whole runs before and
# after the speed-ups (`benchmarks/run_time.py`); the memory of the JS computation at the paper's vocabulary
# (`benchmarks/js_memory.py`); and, per task, the replay rate of the MRTPO runs over the response–reward pairs that exist (a constraint slot a
# prompt does not have is not a pair; PAPER.md §7) and the effective K (PAPER.md §6.5 asks for it per task; the
# paper pools 12–21% over tasks). `make bench` regenerates the files.

# %% tags=["parameters"]
model = "tiny"
real_model = "smollm2"  # the real instruct model whose step and sampling benchmarks are shown (benchmarks/step_cost.py --model)
seeds = [0]
steps = None
force = False
processes = 1  # processes per training job: > 1 trains each missing run by accelerate launch (8: the 7B on 8 GPUs)
tasks = ["sql", "tool", "if"]

# %%
import pandas as pd

from mrtpo.analysis import plots, report

bench = report.bench_rows("step_cost", "tiny")
split = report.step_split(bench)
display(split.pivot_table(index=["task", "variant"], columns="phase", values="seconds", sort=False)
        .reindex(columns=list(report.STEP_PHASES)).assign(step=bench.set_index(["task", "variant"])["median_step_s"],
        ratio_to_gdpo=bench.set_index(["task", "variant"])["ratio_to_gdpo"]).round(3))
print("measured on:", "; ".join(bench[["device", "machine"]].drop_duplicates().astype(str).agg(", ".join, axis=1)),
      "| bases:", ", ".join(bench["model"].unique()),
      f"| {bench['prompts_x_generations'].iloc[0]} per step, {bench['steps_timed'].iloc[0]} timed steps per arm")

# %%
fig = plots.method_bars(split[split.task == split.task.iloc[0]], "variant", "seconds", hue="phase",
                        ylabel="median seconds per step", title=f"step split by phase ({split.task.iloc[0]})")
import seaborn as sns

sns.move_legend(fig.axes[0], "upper left", bbox_to_anchor=(1, 1))  # beside the bars, not over them
fig.tight_layout()
plots.save(fig, "replay_cost_split")

# %% [markdown]
# **The replay against its limit.** `limit_s` = forwards per response (K_eff plus the share of responses with any
# replayed reward) x one no-grad forward over the step's rows under P_all, packed as the replay packs them; the
# goal is `replay_to_limit <= 1.2`. Our GDPO's step over TRL's own `GRPOTrainer` with `normalize_then_sum` on the
# same batches (goal <= 1.02) is the last table: by wall time (median step), and by CPU seconds paired step by step
# with its 95% interval (other jobs on the machine take wall time, not the process's CPU time). Every step of every
# arm starts from the same random state, so while the two policies are equal they sample the same completions:
# `same_completions` is the share of timed steps on which they did (1: the same work throughout, the ratio is the
# two trainers' machinery alone, and the policies stayed equal, update after update).

# %%
display(report.replay_limits(bench).round(3))
to_trl = ["median_step_s", "ratio_to_trl_gdpo", "cpu_ratio_to_trl_gdpo", "cpu_ratio_lo", "cpu_ratio_hi", "same_completions",
          "steps_timed"]
display(bench[bench.variant == "gdpo"].set_index("task")[[c for c in to_trl if c in bench]].round(3))

# %% [markdown]
# ## A real instruct model: SmolLM2-135M-Instruct on CPU
#
# The same split for `real_model` at its registry geometry (`mrtpo plan --model smollm2`), with each phase against
# its limit: the replay against forwards per response × one forward under P_all as above, the loss pass (forward
# and backward) against three no-grad forwards over the step's rows (`loss_to_limit`). Then its sampling
# (`benchmarks/decode_speed.py`): tokens per second of `generate` per batch size and cache, one decoding step
# against a bare forward of the same rows with the cache, and against the arithmetic (B × 2 × parameters at the
# rate of a large matrix product on this machine) and memory (the weights read once at the measured bandwidth)
# limits. "load" says what else ran on the machine while it was measured.

# %%
real = report.bench_rows("step_cost", real_model)
if real.empty:
    print(f"not measured yet: python benchmarks/step_cost.py --model {real_model} --tasks if")
else:
    display(report.step_split(real).pivot_table(index=["task", "variant"], columns="phase", values="seconds", sort=False)
            .reindex(columns=list(report.STEP_PHASES))
            .assign(step=real.set_index(["task", "variant"])["median_step_s"],
                    loss_to_limit=real.set_index(["task", "variant"])["loss_to_limit"],
                    replay_to_limit=real.set_index(["task", "variant"])["replay_to_limit"]).round(2))
    print("geometry:", real["prompts_x_generations"].iloc[0], "per step,", real["max_completion"].iloc[0],
          "completion tokens; where each row was measured:")
    for row in real.itertuples():
        print(f"  {row.variant}: {row.machine}, {row.device}, load: {row.load}")
decode = report.bench_rows("decode_speed", real_model)
if decode.empty:
    print(f"not measured yet: python benchmarks/decode_speed.py --model {real_model}")
else:
    display(decode[["threads", "batch", "cache", "tokens_per_s", "step_ms", "step_forward_ms", "flop_limit_ms",
                    "memory_limit_ms", "to_limit"]].set_index(["threads", "batch", "cache"]))
    for (threads, machine), rows in decode.groupby(["threads", "machine"]):
        print(f"{threads} thread(s) on {machine}: large-product rate {rows['gemm_gflops'].iloc[0]} GFLOP/s, read "
              f"{rows['read_gbs'].iloc[0]} GB/s | load: {rows['load'].iloc[0]}")

# %% [markdown]
# ## Runs per hour
#
# Wall time of one whole 100-step MRTPO tiny run (training and the final evaluation) per task, before the
# speed-ups and after, same configuration and base (`results/bench/run_time.csv`); the goal was to halve it. The
# machine's other work shares its cores: the load columns are its 5-minute load average during each run.

# %%
run_time_file = report.RESULTS / "bench" / "run_time.csv"
if run_time_file.exists():
    display(report.run_time_table(pd.read_csv(run_time_file)).round(2).set_index("task"))
else:
    print("results/bench/run_time.csv is not measured yet (benchmarks/run_time.py)")

# %% [markdown]
# The same question on `real_model`, read off the book's own runs of it (`benchmarks/real_model_steps.py`): per run,
# the threads it trained with, the machine's load at its end, its median step and phases, and the minutes a 100-step
# run would take at its mean step plus its evaluation (the target is 60 minutes on 2 cores). A resumed run counts
# only the steps its last process trained.

# %%
real_runs_file = report.RESULTS / "bench" / "real_model_steps.csv"
if real_runs_file.exists():
    real_runs = pd.read_csv(real_runs_file)
    display(real_runs.set_index(["method", "seed"])[["threads", "load_15min_at_end", "steps_timed", "step_median_s",
                                                     "generation_median_s", "replay_median_s", "loss_median_s",
                                                     "eval_min", "min_per_100_steps"]])
    print("geometry (prompts x G x completion tokens):", ", ".join(real_runs["geometry"].unique()))
else:
    print(f"not measured yet: python benchmarks/real_model_steps.py --model {real_model}")

# %% [markdown]
# ## JS memory at the paper's vocabulary
#
# Extra peak memory of `js_relevance` over its inputs at V = 151,936, T = 2,048, 8 replayed rows (goal 512 MiB; a
# naive implementation holds (K T, V) fp32 temporaries, ~9.3 GiB each): torch's allocator peak and the process's
# resident-set peak, measured in a fresh process per configuration.

# %%
memory = pd.read_csv(report.RESULTS / "bench" / "js_memory.csv")
display(memory[["path", "input_dtype", "H", "chunk_positions", "positions_computed", "extra_peak_alloc_mib",
                "extra_peak_rss_mib", "goal_mib", "seconds"]])

# %%
rates = []
for task in tasks:
    m = report.metrics(report.grid(task, ["mrtpo"], model, seeds, steps, force, processes=processes))
    rates.append({"task": task, **report.replay_rates(m)})
rates = pd.DataFrame(rates).set_index("task")
shared = ["pairs replayed (of those that exist)", "rewards applying per response", "effective K", "replay share of step"]
per_reward = rates.drop(columns=shared).apply(lambda r: ", ".join(f"{k} {v:.2f}" for k, v in r.dropna().items()), axis=1)
with pd.option_context("display.max_colwidth", None):  # the whole text, not cut with "..."
    display(rates[shared].round(3).assign(**{"replayed, per reward": per_reward}))

# %%
fig = plots.method_bars(bench, "variant", "ratio_to_gdpo", hue="task", ylabel="median step time / GDPO's",
                        title="step cost (benchmark)")
plots.save(fig, "replay_cost_bench")

# %% [markdown]
# **Reading the tables.** The replay's cost scales with the effective K, not with K: rewards whose groups
# all agree are never replayed. The benchmarks' machine and sizes are in their CSVs; ratios measured on a
# 2-core CPU with a tiny policy are not GPU figures.

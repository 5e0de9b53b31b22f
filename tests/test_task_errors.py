"""A checker that raises on strange input scores 0, and the error is counted in TRL's per-step metrics."""

from mrtpo.tasks import get_task


def test_tool_checker_errors_are_counted():
    task = get_task("tool")
    correctness = {f.__name__: f for f in task.reward_funcs()}["correctness"]
    logged = {}
    out = correctness(["q"], ["<think>x</think><tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"],
                      functions=["not json"], ground_truth=["[]"], category=["simple_python"],
                      log_metric=logged.__setitem__)
    assert out == [0.0] and logged["correctness/checker_errors"] == 1.0


def test_if_checker_errors_are_counted():
    task = get_task("if")
    slot = task.reward_funcs()[0]
    logged = {}
    out = slot(["p"], ["<think>x</think>answer"], instruction_id_list=[["no:such_checker"]], kwargs=["[{}]"],
               prompt_text=["p"], log_metric=logged.__setitem__)
    assert out == [0.0] and logged[f"{slot.__name__}/checker_errors"] == 1.0

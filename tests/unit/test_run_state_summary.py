"""What a run says of itself: whether its timings can be trusted (a run that timed nothing, the budget
spent before any candidate's timing, is not said to have run without a GPU), and what its plans
chose that the brain wrote no code for."""

from pathlib import Path

import kskill
from kskill.agents.problem import load_problem
from kskill.agents.optimizer import SAME_CODE
from kskill.run_state import AttemptRecord, LoopConfig, RunState

PROBLEM = Path(kskill.__file__).parent / "examples" / "pointwise_chain.py"


def state_with(tmp_path: Path, *representative: bool | None) -> RunState:
    state = RunState("run-timing", load_problem(PROBLEM), LoopConfig(device="cpu"), tmp_path)
    for n, flag in enumerate(representative):
        state.attempts[n] = AttemptRecord(n, "reference" if n == 0 else "seed", f"h{n}", "", representative=flag)
    return state


def test_the_timing_note_tells_nothing_timed_from_no_gpu(tmp_path):
    assert state_with(tmp_path, None, None).timing_note == "none: no candidate was timed"
    assert state_with(tmp_path, None, False).timing_note.startswith("no (no GPU")
    assert state_with(tmp_path, None, True, False).timing_note.startswith("no (no GPU")
    both = state_with(tmp_path, None, True, True)
    assert both.timings_representative and both.timing_note == "yes"


def test_what_was_planned_and_not_written_keeps_the_first_reason_and_leaves_out_repeated_code(tmp_path):
    state = state_with(tmp_path, None, True)
    state.declined = {1: {"flash_attention": "no attention here", "kernel_fusion": f"{SAME_CODE} attempt 2"},
                      3: {"flash_attention": "another reason", "channels_last.nhwc": "no convolution"}}
    assert state.not_written() == {"channels_last.nhwc": "no convolution", "flash_attention": "no attention here"}

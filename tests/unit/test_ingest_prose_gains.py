"""Rules of learned-21 that read the speedups a text states in prose beside its figures and as percentages: a
percentage a verb of speed takes, a percentage cut of a time, a percentage under a speedup header in a table
and the subject of a speedup said in the plural or in words (ingest/relations.py, ingest/tables.py, ingest/claimants.py;
eval/ingest/runs/prose-gains-session47.md), and learned-22's percentage before a noun of gain and table of timings
(eval/ingest/runs/timing-gains-session47.md). Sentences and tables written for the tests; what the extractor makes of
them in a document is tested in test_ingest_extract_rules.py (test_learned21_*, test_learned22_*)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kskill.ingest.claimants import subject_name
from kskill.ingest.relations import gains_of
from kskill.ingest.tables import TableRow, speedups, timed_gain


@pytest.mark.parametrize("text, factors", [
    ("The reordered loop improved the 8K case by 12.5% in our runs.", [1.125]),
    ("With this flag the decoder can run faster by 3% on average.", [1.03]),
    ("Our fused kernel outperforms the eager baseline by up to 60% on long inputs.", [1.6]),
    ("Batching the requests increases serving throughput by about 35% on one GPU.", [1.35]),
    ("Moving the scales to registers was the largest change: +18.5% geomean over all sizes.", [1.185]),
])
def test_a_percentage_a_verb_of_speed_takes_is_one_plus_its_fraction(text, factors):
    assert gains_of(text) == factors


@pytest.mark.parametrize("text, factors", [
    ("Prefetching the next tile reduces the step time by 50% on this card.", [2.0]),
    ("The graph replay gives 20% lower latency per token.", [1.25]),
])
def test_a_percentage_cut_of_a_time_is_the_inverse_of_what_remains(text, factors):
    assert gains_of(text) == factors


@pytest.mark.parametrize("text", [
    "The packed layout improves memory usage by 30% on large batches.",  # memory, not speed
    "Calibration boosts accuracy by 2% on the test split.",  # accuracy
    "The smaller tile reduces register use by 25% per thread.",  # a count of registers, not a time
    "Occupancy rose to 75% after the change.",  # a percentage of a resource
    "Profiling showed that 40% of the time is spent in the softmax.",  # a share of a time
    "Each accelerator in the pod is busier by 20% at peak.",  # an accelerator, no verb of speed
])
def test_a_percentage_that_is_no_speedup_gives_no_factor(text):
    assert gains_of(text) == []


def test_a_percentage_under_a_speedup_header_is_one_plus_its_fraction():
    headers = ("Case", "Before (ms)", "After (ms)", "Speedup")
    assert speedups("| small batch | 0.50 | 0.40 | **+25%** |", headers) == (1.25,)
    assert speedups("| prefill | 3.1 | 2.2 | 41.0% |", headers) == (1.41,)
    assert speedups("| decode | 2.4 | 2.4 | ~0% |", headers) == ()  # the same time: no gain
    assert speedups("| tiny | 1.0 | 1.1 | -9% |", headers) == ()  # a slowdown
    assert speedups("| small batch | 0.50 | 0.40 | 25% |", ("Case", "Before (ms)", "After (ms)", "Occupancy")) == ()


@pytest.mark.parametrize("text, factors", [
    ("The tiled version runs 4.5 times faster than the naive loop.", [4.5]),
    ("The compiled step is three times faster on a laptop GPU.", [3.0]),
    ("With the cache warm, the lookup is twice as fast.", [2.0]),
])
def test_a_factor_said_with_times_or_in_words(text, factors):
    assert gains_of(text) == factors


@pytest.mark.parametrize("text, factors", [
    ("A batch of 64 goes from 300 µs to 75 µs once the copies are overlapped.", [4.0]),
    ("The update takes about 2.4 ms when run eagerly, but only 0.6 ms when it is captured once.", [4.0]),
    ("Decoding one token: 12 ms -> 3 ms.", [4.0]),
    ("The reduction fell from 1.2 ms to 400 us.", [3.0]),
    ("``90.0ms -> 30.0ms => 3x speed up``", [3.0]),  # the factor stated stands for its timings
])
def test_two_timings_of_one_piece_of_work_give_the_first_over_the_second(text, factors):
    assert gains_of(text) == factors


@pytest.mark.parametrize("text", [
    "The all-reduce grows from 8 µs on four GPUs to 11 µs on eight.",  # a time that rises
    "Each iteration takes 5 ms, and the whole run takes 40 s.",  # two timings of different work
    "The host waits go from 900 us to 3 us after capture.",  # past 100x: a part of the work, not the whole
    "We ran the benchmark three times for each size.",  # a count of runs
])
def test_timings_that_state_no_speedup_give_no_factor(text):
    assert gains_of(text) == []


@pytest.mark.parametrize("text, name", [
    ("TileScan computes prefix sums up to 6.5 times faster than the library scan.", "TileScan"),
    ("Packed QLoRA adapters outperform the dense adapters by up to 30% on one GPU.", "Packed QLoRA adapters"),
    ("The fused rotary embedding is three times faster.", "fused rotary embedding"),
    ("The kernel is three times faster.", ""),  # the document's own artefact names no method
    ("The lookup table is three times larger.", ""),  # a size, no speedup
])
def test_the_subject_of_a_speedup_said_in_the_plural_or_in_words_is_a_name(text, name):
    assert subject_name(text) == name


@pytest.mark.parametrize("text, factors", [
    ("Changing to constants provides a 4.4% performance increase on the small sample.", [1.044]),
    ("The new schedule gives a 12% throughput improvement at batch 64.", [1.12]),
    ("We measured a 7% performance uplift from the reordering.", [1.07]),
])
def test_a_percentage_before_a_noun_of_gain_is_one_plus_its_fraction(text, factors):
    """learned-22: "a p% performance increase" is 1 + p/100, as "p% speedup" is."""
    assert gains_of(text) == factors


@pytest.mark.parametrize("text", [
    "The packed format shows a 20% memory increase on long inputs.",  # memory, not speed
    "Turning the check on costs a 3% performance loss.",  # a loss
])
def test_a_percentage_before_a_noun_of_no_gain_gives_no_factor(text):
    assert gains_of(text) == []


def _last_row(headers: tuple[str, ...], cells: tuple[str, ...], caption: str = "") -> TableRow:
    return TableRow(cells, headers, caption, last=True)


def test_a_timing_tables_last_row_gives_the_titles_system_the_first_columns_time_over_its_own():
    """learned-22 (tables.timed_gain): the caption says the figures are times, the columns are systems, one is the name
    the title leads with; its gain is the first other column's time over its own."""
    headers = ("", "PyTorch", "xLib", "QuickAttn")
    title = "QuickAttn: Fast Attention Inference"
    row = _last_row(headers, ("1024", "53.2", "50.3", "24.7"), "Batch 16, execution time in millisecond:")
    assert timed_gain(row, title) == ("QuickAttn", 2.154)
    assert timed_gain(replace(row, last=False), title) is None  # not the table's last row
    assert timed_gain(replace(row, caption="Batch 16, peak memory in GB:"), title) is None  # no times
    assert timed_gain(row, "Fast Attention Inference") is None  # the title leads with no name
    headers = ("Size", "PyTorch (ms)", "QuickAttn (ms)")
    assert timed_gain(_last_row(headers, ("4096", "3.0", "1.5")), title) == ("QuickAttn", 2.0)


def test_a_timing_table_whose_columns_are_no_alternatives_gives_no_gain():
    """Columns that are parts of one run or other measures are not systems compared: no gain."""
    title = "QuickAttn: Fast Attention Inference"
    parts = ("Size", "QuickAttn (ms)", "Forward (ms)", "Backward (ms)")
    assert timed_gain(_last_row(parts, ("4096", "3.0", "1.0", "2.0")), title) is None
    measures = ("Size", "Baseline (ms)", "QuickAttn (ms)", "Footprint (GB)")  # units differ: not one measure
    assert timed_gain(_last_row(measures, ("4096", "3.0", "1.5", "12")), title) is None
    stated = ("Size", "PyTorch (ms)", "QuickAttn (ms)", "Speedup")  # the table states its speedups itself
    assert timed_gain(_last_row(stated, ("4096", "3.0", "1.5", "2.0x")), title) is None


@pytest.mark.parametrize("text, name", [
    ("Switching to the blocked layout gives a 1.5x speedup on the 4K case.", "blocked layout"),
    ("As the plots show, changing to use fragment shaders provides a 3% performance increase here.", ""),
    ("As you can see below, changing to use push descriptors provides a 3% performance increase here.",
     "push descriptors"),
    ("Switching to fp32 accumulation costs 5% accuracy.", ""),  # no result claimed: a cost
])
def test_a_switch_opening_a_claimed_result_credits_what_it_switches_to(text, name):
    """learned-22 (claimants.SWITCHED): "changing to use X provides a 4.4% performance increase" claims it for X."""
    assert subject_name(text) == name

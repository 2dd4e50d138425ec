"""The audit's text and page from a recorded audit (tests/fixtures/audit), and the speedup plot."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kskill.audit import group_rejections, render_text, user_reason
from kskill.audit_html import decision_elements, render_html
from kskill.plots import Point, speedup_figure

AUDIT = json.loads((Path(__file__).parents[1] / "fixtures" / "audit" / "pointwise_chain.json").read_text())
KNOWN = "known: algebraic_simplification, autotune_launch, channels_last, cuda_graph"


def test_rejections_group_informative_kinds_first_and_merge_equal_reasons():
    rejected = [
        {"technique": "fused_loss", "reason": "requires has_loss is true: not met"},
        {"technique": "cache_modifiers", "reason": f"the brain cannot apply it here: unknown technique 'cache_modifiers'; {KNOWN}"},
        {"technique": "hoist", "reason": f"the brain cannot apply it here: unknown technique 'hoist'; {KNOWN}"},
        {"technique": "autotune_launch", "reason": "tabu: tried from this parent at attempt 3: no gain (0.3x vs parent 0.4x)"},
        {"technique": "flash_attention", "reason": "requires has_attention is true: not met"},
        {"technique": "vectorized_access", "reason": "outranked by kernel_fusion"},
        {"technique": "split_k", "reason": "requires ncu_sm_busy_pct < 40: ncu_sm_busy_pct was not observed"},
    ]
    groups = group_rejections(rejected)
    assert [g["kind"] for g in groups] == ["outranked", "tabu", "cannot_apply", "not_observed", "precondition"]
    cannot = groups[2]
    assert cannot["lines"] == [{"techniques": ["cache_modifiers", "hoist"], "why": "the recipe brain has no recipe for it"}]
    assert groups[4]["collapsed"] and [i["technique"] for i in groups[4]["items"]] == ["fused_loss", "flash_attention"]
    assert groups[0]["lines"] == [{"techniques": ["vectorized_access"], "why": "by kernel_fusion"}]


def test_user_reasons_hide_internal_messages():
    assert user_reason(f"the brain cannot apply it here: unknown technique 'x'; {KNOWN}") == \
        "the recipe brain has no recipe for it"
    assert user_reason("the brain cannot apply it here: torch.fx cannot capture the reference (TypeError: ...)") == \
        "the recipe brain cannot trace the reference with torch.fx"
    assert user_reason("outranked by kernel_fusion") == "outranked by kernel_fusion"


def test_text_leads_with_informative_rejections_and_collapses_unmet_preconditions():
    text = render_text(AUDIT)
    block = text[text.index("attempt 4:"):text.index("attempt 5:")]
    lines = [line for line in block.splitlines() if line.startswith("  rejected")]
    assert lines[0].startswith("  rejected (tabu): autotune_launch: tried from this parent at attempt 3")
    assert sum("precondition not met" in line for line in lines) == 1
    assert "11 technique(s)" in block and "(+5 more)" in block
    assert "known:" not in text and "unknown technique" not in text
    assert "timings not representative" in text.splitlines()[1]


def test_decision_graph_reads_left_to_right_with_values_on_the_nodes():
    elements = decision_elements(AUDIT["attempts"][2])
    nodes = {e["data"]["id"]: e["data"] for e in elements if "source" not in e["data"]}
    edges = [(e["data"]["source"], e["data"]["target"], e["data"]["kind"]) for e in elements if "source" in e["data"]]
    assert nodes["o:code_launches_per_forward"]["label"] == "code_launches_per_forward = 7"
    assert ("o:code_launches_per_forward", next(n for n in nodes if n.startswith("c:") and "code_launches" in
            nodes[n]["label"]), "observed") in edges
    assert ("b:materialized_intermediates", "t:kernel_fusion", "selected") in edges
    assert ("t:kernel_fusion", "a:2", "outcome") in edges
    assert {n["kind"] for n in nodes.values()} == {"observation", "condition", "bottleneck", "selected", "rejected",
                                                   "verified"}
    for n in nodes.values():  # room for every line of every label
        lines = n["label"].split("\n")
        assert n["h"] >= 16 * len(lines) and n["w"] >= 6 * max(map(len, lines))


def test_failed_attempt_ends_in_its_failure_pattern():
    elements = decision_elements(AUDIT["attempts"][5])
    edges = [(e["data"]["source"], e["data"]["target"]) for e in elements if "source" in e["data"]]
    assert ("a:5", "p:fp_triton_compile_error") in edges
    assert any(e["data"].get("kind") == "failed" for e in elements)


def test_page_is_self_contained_and_says_what_matters():
    page = render_html(AUDIT)
    assert not re.search(r"<(script|img|iframe|link|source)\b[^>]*\b(src|href)=", page), "nothing is fetched"
    assert not re.search(r"url\(\s*['\"]?https?:", page) and "@import" not in page
    assert "Timings not representative" in page and "fastest verified candidate" in page
    assert page.count('class="graph"') == 4, "attempts 0 and 1 have no decision and get no graph"
    assert "<code>max_pointwise_chain &gt;= 2</code>" in page, "condition text is on the page, not only on hover"
    assert "white-space:pre-wrap" in page and "MATCH trajectory" in page
    assert "cytoscape" in page and "dagre" in page


@pytest.mark.parametrize("representative", [True, False])
def test_speedup_plot_has_whole_attempt_ticks_and_labels(representative):
    figure = speedup_figure([Point(1, 0.9, "seed"), Point(2, None, "kernel_fusion"), Point(3, 1.4, "autotune_launch")],
                            "t", representative)
    ax = figure.axes[0]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    texts = [t.get_text() for t in ax.texts]
    assert texts[:3] == ["seed", "kernel_fusion", "autotune_launch"]
    assert ("timings not representative (no GPU)" in texts) is (not representative)


def test_no_plot_when_nothing_was_timed():
    assert speedup_figure([Point(1, None, "seed")], "t", False) is None

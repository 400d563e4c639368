"""Jupyter: a report's HTML shows its headline tables, escaped."""

import streamscope


def test_report_html_has_the_headline():
    t = streamscope.load("traces/torch-fsdp2-h200x2")
    r = t.report()
    html = r._repr_html_()
    assert html.count("<table") >= 3
    for k in r["headline"]["ranks"]:
        assert f"{k['median_step_ms']:,.2f}" in html
    assert "Straggler: rank" in html
    assert t._repr_html_() == html


def test_html_escapes_names():
    r = streamscope.Report(
        {
            "headline": {
                "ranks": [
                    {
                        "rank": 0,
                        "device": "<script>alert(1)</script>",
                        "top_kernel": {"name": "void k<float, 4>(T&)", "class": "compute"},
                    }
                ]
            },
            "diagnostics": [],
        }
    )
    html = r._repr_html_()
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "void k&lt;float, 4&gt;(T&amp;)" in html

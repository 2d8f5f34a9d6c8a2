"""bench.turns reads a benchmark's figures out of its output, run after run."""

from __future__ import annotations

from bench.turns import figures, medians, shown

RUN = """receiver on SQLite, 64 clients: 8000 durable transitions (4000 pairs) in 1.03 s
  receiver CPU    182 us per transition (user + system; event loop 71, writer process 111)
  throughput      7,781 transitions/s
  receiver CPU    199 us per transition (user + system; event loop 86, writer process 112)
ratio receiver / bare loop: 1.34
no figure here
"""


def test_each_line_with_numbers_is_a_figure_and_a_repeated_line_is_counted_apart() -> None:
    found = figures(RUN)
    cpu = "  receiver CPU    # us per transition (user + system; event loop #, writer process #)"
    assert found[(cpu, 0)] == [182, 71, 111] and found[(cpu, 1)] == [199, 86, 112]
    assert found[("  throughput      # transitions/s", 0)] == [7781]
    assert len(found) == 5


def test_the_medians_are_taken_number_by_number_and_shown_in_place() -> None:
    runs = [figures(RUN.replace("7,781", rate)) for rate in ("7,781", "9,100", "8,000")]
    middle = medians(runs)
    key = ("  throughput      # transitions/s", 0)
    assert middle[key] == [8000]
    assert shown(*key[:1], middle[key]) == "  throughput      8,000 transitions/s"
    # A figure missing from one run is left out rather than compared with nothing.
    assert key not in medians([*runs, figures("other output 1")])

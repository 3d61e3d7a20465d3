#!/usr/bin/env python3
"""Unit tests for scripts/pg-sweep.py's table arithmetic: python3 scripts/test_pg_sweep.py"""

import importlib.util
import os
import unittest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pg-sweep.py")
_SPEC = importlib.util.spec_from_file_location("pg_sweep", _PATH)
pg_sweep = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(pg_sweep)


class PercentOfBestOther(unittest.TestCase):
    def test_a_cell_is_never_compared_with_itself(self):
        # The best cell is measured against the runner-up, so it can exceed 100%.
        self.assertEqual(pg_sweep.percent_of_best_other([50, 200, 100]), [25.0, 200.0, 50.0])

    def test_a_single_cell_has_no_comparison(self):
        self.assertEqual(pg_sweep.percent_of_best_other([1234.5]), [None])
        self.assertEqual(pg_sweep.format_percent(None), "—")

    def test_a_tie_for_best_is_100_percent_each(self):
        self.assertEqual(pg_sweep.percent_of_best_other([80, 80, 40]), [100.0, 100.0, 50.0])

    def test_others_all_zero_has_no_comparison(self):
        self.assertEqual(pg_sweep.percent_of_best_other([0, 0]), [None, None])
        self.assertEqual(pg_sweep.percent_of_best_other([5, 0]), [None, 0.0])

    def test_empty(self):
        self.assertEqual(pg_sweep.percent_of_best_other([]), [])

    def test_benchmarks_md_run_2_at_32_workers(self):
        # BENCHMARKS.md, section 3, run 2: contention at 32 workers (1613) was the best cell;
        # the best of the others was contention at 16 workers (1298).
        cells = [911, 1178, 884, 743, 464, 894, 1136, 1049, 810, 653, 1022, 576, 501, 553, 692,
                 1019, 1077, 980, 779, 631, 1192, 894, 866, 1068, 820, 660, 1225, 943, 1298, 1613]
        pct = pg_sweep.percent_of_best_other(cells)
        self.assertEqual(pg_sweep.format_percent(pct[-1]), "124%")
        self.assertEqual(pg_sweep.format_percent(pct[-2]), "80%")
        self.assertEqual(pg_sweep.format_percent(pct[0]), "56%")

    def test_format(self):
        self.assertEqual(pg_sweep.format_percent(103.56), "104%")
        self.assertEqual(pg_sweep.format_percent(0.0), "0%")


if __name__ == "__main__":
    unittest.main()

"""Old import path: `tfpipe.bench_report` is `tfpipe.bench.report` (the chart: `tfpipe.bench.chart`)."""

import sys

from tfpipe.bench import chart as _chart
from tfpipe.bench import report as _report

_report.plot_bench = _chart.plot_bench  # it lived here before the chart had a module of its own
sys.modules[__name__] = _report

#!/usr/bin/env python3
"""Draws a `softrnic perf --json` run: a picture (SVG) and a table (Markdown) for
docs/performance.md.

    softrnic perf --all --json > run.json
    python3 tools/scripts/perf_plot.py run.json --svg perf.svg --table perf.md

The picture has two panels, each with a logarithmic x axis:

- throughput against message size: softrnic's RC RDMA WRITE on one QP (`rc_write_size_<N>`)
  and the kernel's UDP GSO+GRO limit for the same packets (`raw_udp_gso_size_<N>`);
- throughput against the number of QPs writing at once (`rc_write_qps_<i>`), with one QP's
  figure and the raw limit of 64 KiB runs (`raw_udp_gso_bw`) as horizontal references.

The table has a row per line that has a baseline: its figure, the baseline's, and the ratio
`softrnic perf` computed. A set the run did not measure is left out of both. Under the title
and above the table goes the run's record (`run`: command, date, kernel, CPUs).

Python 3's standard library only: the SVG is written by hand.
"""

import argparse
import datetime
import json
import math
import sys
from xml.sax.saxutils import escape, quoteattr

# The headline field of a line, by the unit it is in, as `softrnic perf` prints them.
UNITS = [
    ("gbit_per_s", "{:.2f} Gbit/s"),
    ("mean_us", "{:.1f} µs mean RTT"),
    ("us_per_iter", "{:.2f} µs/iter"),
    ("ms", "{:.1f} ms"),
]

# The picture's layout, in SVG user units (pixels).
WIDTH, HEIGHT = 960, 480
PANEL_W, PANEL_H = 370, 250  # the plot area of a panel
PANEL_TOP = 100
PANEL_LEFT = (80, 80 + PANEL_W + 110)
SOFTRNIC, RAW, ONE_QP = "#1f5fa8", "#c0392b", "#7f8c8d"
LIMIT_DASH, ONE_QP_DASH = "6 4", "2 3"  # the kernel's limit dashed, one QP's dotted
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def headline(line):
    """The line's headline figure and how to print it: (value or None, format)."""
    for field, fmt in UNITS:
        if field in line:
            value = line[field]
            return (value if isinstance(value, (int, float)) else None), fmt
    return None, "{}"


def figure_text(line):
    value, fmt = headline(line)
    return "not measured" if value is None else fmt.format(value)


def size_text(n):
    """`1 MiB`, `64 KiB` or `100 B`, as softrnic prints sizes."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def run_record(run):
    """The run's command and where it ran ("2026-05-28, Linux 6.1.0, 2 CPUs (model)"), from
    its record; empty strings for what it does not say."""
    if not isinstance(run, dict):
        return "", ""
    where = []
    if run.get("unix_time"):
        when = datetime.datetime.fromtimestamp(run["unix_time"], datetime.timezone.utc)
        where.append(when.strftime("%Y-%m-%d"))
    if run.get("kernel"):
        where.append(f"Linux {run['kernel']}")
    if run.get("cpus"):
        model = f" ({run['cpu_model']})" if run.get("cpu_model") else ""
        where.append(f"{run['cpus']} CPUs{model}")
    return run.get("command") or "", ", ".join(where)


def lines_by(report, prefix, x_field):
    """The lines whose key starts with `prefix`, as (x, line) sorted by x."""
    found = [(v[x_field], v) for k, v in report.items() if k.startswith(prefix)]
    return sorted(found, key=lambda p: p[0])


# ---- Markdown ----------------------------------------------------------------------------


def markdown_table(report):
    """The run's record, then a row per line with a baseline: figure, baseline, ratio."""
    rows = [
        "| measured | figure | judged against | its figure | ratio |",
        "|---|---|---|---|---|",
    ]
    for line in report.values():
        if not isinstance(line, dict) or "baseline" not in line:
            continue
        base = report.get(line["baseline"], {})
        ratio = line.get("ratio")
        rows.append(
            "| {} | {} | {} | {} | {} |".format(
                " ".join(line["label"].split()),
                figure_text(line),
                " ".join(base.get("label", line["baseline"]).split()),
                figure_text(base) if base else "not measured",
                "–" if ratio is None else f"{ratio:.2f}x",
            )
        )
    command, where = run_record(report.get("run"))
    words = ["Measured"]
    if command:
        words.append(f"with `{command}`")
    if where:
        words.append(f"on {where}")
    head = [" ".join(words) + ":", ""] if len(words) > 1 else []
    return "\n".join(head + rows) + "\n"


# ---- SVG ---------------------------------------------------------------------------------


def nice_step(span, ticks=5):
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def text(x, y, s, size=12, anchor="start", weight="normal", transform=None):
    """A `<text>` element: `s` at (x, y), anchored at its start, middle or end."""
    extra = f" transform='{transform}'" if transform else ""
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' "
        f"font-weight='{weight}' {FONT}{extra}>{escape(s)}</text>"
    )


def dash_attr(dash):
    """The attribute that dashes a line as `dash` says ("6 4"), none for a solid line."""
    return f" stroke-dasharray='{dash}'" if dash else ""


class Panel:
    """One plot: a log2 x axis over the data's x values, a linear y axis from 0 to a round
    number above `y_max`."""

    def __init__(self, left, xs, y_max):
        self.left, self.top = left, PANEL_TOP
        lo, hi = math.log2(min(xs)), math.log2(max(xs))
        if lo == hi:  # one point: centre it
            lo, hi = lo - 1, hi + 1
        pad = (hi - lo) * 0.06
        self.x_lo, self.x_hi = lo - pad, hi + pad
        self.step = nice_step(max(y_max, 1e-9) * 1.1)
        self.y_max = self.step * math.ceil(max(y_max, 1e-9) * 1.1 / self.step)

    def x(self, value):
        frac = (math.log2(value) - self.x_lo) / (self.x_hi - self.x_lo)
        return self.left + frac * PANEL_W

    def y(self, value):
        return self.top + PANEL_H - value / self.y_max * PANEL_H

    def frame(self, title, x_label, x_ticks):
        """Title, grid, axes, tick labels and axis titles."""
        out = ["<g class='axes'>"]
        cx = self.left + PANEL_W / 2
        out.append(text(cx, self.top - 14, title, size=14, anchor="middle", weight="bold"))
        tick = 0.0
        while tick <= self.y_max + 1e-9:
            y = self.y(tick)
            out.append(
                f"<line x1='{self.left}' y1='{y:.1f}' x2='{self.left + PANEL_W}' "
                f"y2='{y:.1f}' stroke='#e3e3e3'/>"
            )
            out.append(text(self.left - 8, y + 4, f"{tick:g}", anchor="end"))
            tick += self.step
        for value, label in x_ticks:
            x = self.x(value)
            bottom = self.top + PANEL_H
            out.append(
                f"<line x1='{x:.1f}' y1='{bottom}' x2='{x:.1f}' y2='{bottom + 5}' stroke='#333'/>"
            )
            out.append(text(x, bottom + 19, label, anchor="middle"))
        out.append(
            f"<rect x='{self.left}' y='{self.top}' width='{PANEL_W}' height='{PANEL_H}' "
            "fill='none' stroke='#333'/>"
        )
        out.append(text(cx, self.top + PANEL_H + 42, x_label, anchor="middle"))
        y_mid = self.top + PANEL_H / 2
        out.append(
            text(self.left - 48, y_mid, "Gbit/s of payload", anchor="middle",
                 transform=f"rotate(-90 {self.left - 48} {y_mid})")
        )
        out.append("</g>")
        return out

    def series(self, label, points, colour, dash=None):
        """A line through `points` ((x, y); a y of None is left out), a dot at each; dashed
        as `dash` says, if given."""
        points = [(x, y) for x, y in points if y is not None]
        if not points:
            return []
        path = " ".join(f"{self.x(x):.1f},{self.y(y):.1f}" for x, y in points)
        out = [f"<g class='series' data-label={quoteattr(label)}>"]
        out.append(
            f"<polyline points='{path}' fill='none' stroke='{colour}' stroke-width='2'"
            f"{dash_attr(dash)}/>"
        )
        for x, y in points:
            out.append(
                f"<circle cx='{self.x(x):.1f}' cy='{self.y(y):.1f}' r='4' fill='{colour}'>"
                f"<title>{escape(f'{y:.2f} Gbit/s')}</title></circle>"
            )
        out.append("</g>")
        return out

    def reference(self, label, value, colour, dash):
        """A horizontal line across the panel at `value`, dashed as `dash` says."""
        if value is None:
            return []
        y = self.y(value)
        return [
            f"<g class='reference' data-label={quoteattr(label)}>",
            f"<line x1='{self.left}' y1='{y:.1f}' x2='{self.left + PANEL_W}' y2='{y:.1f}' "
            f"stroke='{colour}' stroke-width='1.5'{dash_attr(dash)}/>",
            "</g>",
        ]

    def legend(self, entries):
        """A key under the axis title: (label, colour, dash) per entry."""
        out = ["<g class='legend'>"]
        y = self.top + PANEL_H + 64
        for i, (label, colour, dash) in enumerate(entries):
            yy = y + 18 * i
            out.append(
                f"<line x1='{self.left}' y1='{yy}' x2='{self.left + 28}' y2='{yy}' "
                f"stroke='{colour}' stroke-width='2'{dash_attr(dash)}/>"
            )
            out.append(text(self.left + 36, yy + 4, label))
        out.append("</g>")
        return out


def value_of(line):
    """The line's headline figure; None for a line not measured or not there."""
    return headline(line)[0] if line else None


def panel_group(x_name, panel, frame, marks, legend):
    """A panel's `<g>`: its frame ((title, x label, x ticks), see `Panel.frame`), its marks
    (series and references, drawn in order) and its legend."""
    return [
        f"<g class='panel' data-x={quoteattr(x_name)}>",
        *panel.frame(*frame),
        *marks,
        *panel.legend(legend),
        "</g>",
    ]


def sizes_panel(report, left, y_max):
    """Throughput against message size: softrnic and the raw limit for the same packets."""
    rc = lines_by(report, "rc_write_size_", "message_len")
    if not rc:
        return []
    raw = [(n, value_of(report.get(line["baseline"]))) for n, line in rc]
    rc = [(n, value_of(line)) for n, line in rc]
    panel = Panel(left, [n for n, _ in rc], y_max)
    return panel_group(
        "message size",
        panel,
        (
            "against message size (1 QP)",
            "message size (log scale)",
            [(n, size_text(n)) for n, _ in rc],
        ),
        panel.series("raw UDP GSO+GRO, same packets", raw, RAW, LIMIT_DASH)
        + panel.series("softrnic RC RDMA WRITE", rc, SOFTRNIC),
        [
            ("softrnic RC RDMA WRITE, 16 outstanding", SOFTRNIC, None),
            ("raw UDP GSO+GRO of the same packets (kernel limit)", RAW, LIMIT_DASH),
        ],
    )


def qps_panel(report, left, y_max):
    """Aggregate throughput against QP count, with one QP's and the raw limit as lines."""
    qps = lines_by(report, "rc_write_qps_", "qps")
    if not qps:
        return []
    points = [(n, value_of(line)) for n, line in qps]
    one = next((y for n, y in points if n == 1), value_of(report.get("rc_write_bw")))
    raw = value_of(report.get("raw_udp_gso_bw"))
    if raw is None:
        raw = value_of(report.get("raw_udp_gso_size_65536"))
    panel = Panel(left, [n for n, _ in points], y_max)
    return panel_group(
        "QPs",
        panel,
        (
            "against QPs writing at once (64 KiB)",
            "QPs (log scale)",
            [(n, str(n)) for n, _ in points],
        ),
        panel.reference("raw UDP GSO+GRO, 64 KiB runs", raw, RAW, LIMIT_DASH)
        + panel.reference("softrnic, 1 QP", one, ONE_QP, ONE_QP_DASH)
        + panel.series("softrnic RC RDMA WRITE, all QPs", points, SOFTRNIC),
        [
            ("softrnic RC RDMA WRITE, aggregate of all QPs", SOFTRNIC, None),
            ("softrnic, 1 QP", ONE_QP, ONE_QP_DASH),
            ("raw UDP GSO+GRO, 64 KiB runs (kernel limit)", RAW, LIMIT_DASH),
        ],
    )


def svg(report):
    """The whole picture, as SVG text."""
    out = [
        "<?xml version='1.0' encoding='UTF-8'?>",
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{HEIGHT}' "
        f"viewBox='0 0 {WIDTH} {HEIGHT}'>",
        f"<rect width='{WIDTH}' height='{HEIGHT}' fill='white'/>",
        text(WIDTH / 2, 30, "softrnic RC RDMA WRITE throughput over loopback, beside the "
             "kernel's UDP limit", size=17, anchor="middle", weight="bold"),
    ]
    note = " on ".join(part for part in run_record(report.get("run")) if part)
    if note:
        out.append(text(WIDTH / 2, 52, note, size=11, anchor="middle"))
    # One y scale for both panels, up to the run's largest throughput, so that heights compare.
    y_max = max(
        (v["gbit_per_s"] for v in report.values()
         if isinstance(v, dict) and isinstance(v.get("gbit_per_s"), (int, float))),
        default=1.0,
    )
    out += sizes_panel(report, PANEL_LEFT[0], y_max)
    out += qps_panel(report, PANEL_LEFT[1], y_max)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run", nargs="?", default="-",
        help="the output of `softrnic perf --json` (default, or -: standard input)",
    )
    parser.add_argument("--svg", help="write the picture here")
    parser.add_argument("--table", help="write the Markdown table here (default: standard output)")
    args = parser.parse_args(argv)
    if args.run == "-":
        report = json.load(sys.stdin)
    else:
        with open(args.run, encoding="utf-8") as f:
            report = json.load(f)
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg(report))
    table = markdown_table(report)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as f:
            f.write(table)
    else:
        sys.stdout.write(table)


if __name__ == "__main__":
    main()

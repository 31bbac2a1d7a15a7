//! `tools/scripts/perf_plot.py` on a small `softrnic perf --all --json` run checked into
//! `tests/data/perf_run.json`: the SVG is well-formed XML with one point per measured figure
//! in each series, and the Markdown table has a row per line with a baseline, each with its
//! figure, its baseline's and the ratio. Skips (`softrnic_testkit::skip`) where there is no
//! `python3`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use roxmltree::{Document, Node};

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture() -> PathBuf {
    manifest_dir().join("tests/data/perf_run.json")
}

/// `python3 tools/scripts/perf_plot.py ARGS`, with `stdin` as its standard input; None when
/// there is no `python3` to run it.
fn perf_plot(args: &[&Path], stdin: Stdio) -> Option<Output> {
    let started = Command::new("python3")
        .arg(manifest_dir().join("scripts/perf_plot.py"))
        .args(args)
        .stdin(stdin)
        .output();
    match started {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("python3: {e}"),
    }
}

/// A fresh folder for this test's outputs.
fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("softrnic-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn has_class(n: &Node, class: &str) -> bool {
    n.attribute("class") == Some(class)
}

/// The descendants of `n` of class `class`, by their `data-label`, with how many `circle`s
/// (points) each holds.
fn labelled(n: Node, class: &str) -> Vec<(String, usize)> {
    n.descendants()
        .filter(|d| has_class(d, class))
        .map(|g| {
            let points = g.descendants().filter(|d| d.has_tag_name("circle")).count();
            (g.attribute("data-label").unwrap_or("").to_owned(), points)
        })
        .collect()
}

#[test]
fn the_script_draws_both_panels_and_tabulates_every_ratio() {
    let dir = out_dir("perf-plot");
    let (run, svg_path, table_path) = (fixture(), dir.join("perf.svg"), dir.join("perf.md"));
    let args = [
        run.as_path(),
        Path::new("--svg"),
        &svg_path,
        Path::new("--table"),
        &table_path,
    ];
    let Some(out) = perf_plot(&args, Stdio::null()) else {
        softrnic_testkit::skip(
            "the_script_draws_both_panels_and_tabulates_every_ratio",
            "python3 is not installed, so tools/scripts/perf_plot.py cannot run",
        );
        return;
    };
    assert!(out.status.success(), "{out:?}");

    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = Document::parse(&svg).expect("the SVG is well-formed XML");
    let root = doc.root_element();
    assert!(root.has_tag_name(("http://www.w3.org/2000/svg", "svg")));
    let panels: Vec<Node> = root
        .descendants()
        .filter(|n| has_class(n, "panel"))
        .collect();
    assert_eq!(panels.len(), 2);
    // Message sizes 4 KiB, 64 KiB and 1 MiB: softrnic and the raw limit, three points each.
    assert_eq!(panels[0].attribute("data-x"), Some("message size"));
    assert_eq!(
        labelled(panels[0], "series"),
        [
            ("raw UDP GSO+GRO, same packets".to_owned(), 3),
            ("softrnic RC RDMA WRITE".to_owned(), 3)
        ]
    );
    // QP counts 1, 4 and 16, with one QP's figure and the raw limit as lines.
    assert_eq!(panels[1].attribute("data-x"), Some("QPs"));
    assert_eq!(
        labelled(panels[1], "series"),
        [("softrnic RC RDMA WRITE, all QPs".to_owned(), 3)]
    );
    assert_eq!(
        labelled(panels[1], "reference"),
        [
            ("raw UDP GSO+GRO, 64 KiB runs".to_owned(), 0),
            ("softrnic, 1 QP".to_owned(), 0)
        ]
    );
    let texts: Vec<&str> = root.descendants().filter_map(|n| n.text()).collect();
    for label in ["4 KiB", "64 KiB", "1 MiB", "16", "Gbit/s of payload"] {
        assert!(texts.contains(&label), "no {label:?} in {texts:?}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t.contains("on 2026-01-01, Linux 6.1.0-test")),
        "no note of the run in {texts:?}"
    );

    let table = std::fs::read_to_string(&table_path).unwrap();
    for row in [
        "| measured | figure | judged against | its figure | ratio |",
        "| RC RDMA WRITE 64 KiB, PMTU 4096, 1 QP | 20.00 Gbit/s \
         | raw UDP 15 x 4112 B GSO send, GRO receive | 40.00 Gbit/s | 0.50x |",
        "| RC SEND 64 B ping-pong | 8.4 µs mean RTT \
         | raw UDP 64 B busy-poll ping-pong | 6.0 µs mean RTT | 1.40x |",
        "| RC SEND 64 B ping-pong, 1 thread | 12.0 µs mean RTT \
         | raw UDP 64 B busy-poll ping-pong | 6.0 µs mean RTT | 2.00x |",
        "| RC RDMA WRITE 4 KiB, PMTU 4096, 1 QP | 4.00 Gbit/s \
         | raw UDP 1 x 4112 B GSO send, GRO receive (4 KiB WRITE) | 10.00 Gbit/s | 0.40x |",
        "| RC RDMA WRITE 64 KiB, 16 QPs | 18.00 Gbit/s \
         | RC RDMA WRITE 64 KiB, 1 QP | 20.00 Gbit/s | 0.90x |",
    ] {
        assert!(
            table.lines().any(|l| l == row),
            "no row {row:?} in\n{table}"
        );
    }
    // A row per line with a baseline: 4 of the default run, 3 sizes, 2 QP counts.
    assert_eq!(table.lines().filter(|l| l.starts_with("| ")).count(), 1 + 9);
    assert!(
        table.starts_with("Measured with `softrnic perf --all"),
        "{table}"
    );

    // The same run on standard input gives the same table on standard output.
    let piped = perf_plot(&[], Stdio::from(std::fs::File::open(&run).unwrap())).unwrap();
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(String::from_utf8(piped.stdout).unwrap(), table);
    std::fs::remove_dir_all(&dir).unwrap();
}

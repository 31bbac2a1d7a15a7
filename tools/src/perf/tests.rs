//! The report's layout and ratios, on hand-made lines (no measurement runs here).

use serde_json::Map;

use super::{median, ratio, size_text, Measurement, Report, Unit};

fn line(key: &str, label: &str, value: f64, baseline: Option<&str>) -> Measurement {
    Measurement {
        key: key.into(),
        label: label.into(),
        value,
        unit: Unit::GbitPerSec,
        detail: "d".into(),
        baseline: baseline.map(str::to_owned),
        paired: None,
        fields: Map::new(),
    }
}

#[test]
fn ratio_is_a_over_b_and_none_without_meaning() {
    assert_eq!(ratio(3.0, 2.0), Some(1.5));
    assert_eq!(ratio(1.0, 0.0), None);
    assert_eq!(ratio(f64::NAN, 1.0), None);
}

#[test]
fn a_line_with_a_baseline_prints_its_ratio_and_labels_align() {
    let report = Report {
        lines: vec![
            line("base", "short", 8.0, None),
            line("other", "a longer label", 2.0, Some("base")),
            line("orphan", "x", 1.0, Some("missing")),
        ],
    };
    let mut out = Vec::new();
    report.print(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "short:          8.00 Gbit/s (d)");
    assert_eq!(lines[1], "a longer label: 2.00 Gbit/s (d)  = 0.25x base");
    assert_eq!(
        lines[2],
        "x:              1.00 Gbit/s (d)  (no missing to compare with)"
    );

    let json = report.to_json();
    assert_eq!(json["other"]["baseline"], "base");
    assert_eq!(json["other"]["ratio"], 0.25);
    assert!(json["orphan"]["ratio"].is_null());
    assert!(json["base"].get("ratio").is_none());
}

#[test]
fn sizes_print_in_mib_or_kib_when_whole() {
    assert_eq!(size_text(4096), "4 KiB");
    assert_eq!(size_text(64), "64 B");
    assert_eq!(size_text(1500), "1500 B");
    assert_eq!(size_text(1 << 20), "1 MiB");
    assert_eq!(size_text(1536 * 1024), "1536 KiB");
    assert_eq!(size_text(0), "0 B");
}

#[test]
fn a_line_not_measured_says_so_and_gives_no_ratio() {
    let report = Report {
        lines: vec![
            line("base", "base", f64::NAN, None),
            line("other", "rc", 2.0, Some("base")),
        ],
    };
    let mut out = Vec::new();
    report.print(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "base: not measured (d)");
    assert_eq!(lines[1], "rc:   2.00 Gbit/s (d)  (no base to compare with)");
    assert!(report.to_json()["other"]["ratio"].is_null());
}

#[test]
fn median_of_odd_even_and_none() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    assert_eq!(median(&[]), 0.0);
}

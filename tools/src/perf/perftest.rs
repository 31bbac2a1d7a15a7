//! `softrnic perf --perftest`: what a user of perftest sees. perftest's own `ib_send_lat`,
//! `ib_write_lat` and `ib_read_lat` (RC, 64 bytes) run unmodified through the drop-in
//! `libibverbs.so.1` (`softrnic run`), a server and a client on two addresses (127.0.0.1
//! and 127.0.0.2 by default), with the default progress; each is judged against the raw
//! kernel UDP busy-poll ping-pong ([`super::raw_udp::udp_pingpong`]) measured in the same
//! rounds. Then `ib_write_bw`, the same way (`perftest_bw.rs`).
//!
//! perftest prints, per tool, the minimum, the *typical* (the median), the mean and the 99th
//! percentile. For SEND and WRITE that is a one-way latency (half a round trip), judged
//! against half the raw round trip; an RDMA READ is a whole round trip, judged against the
//! raw round trip. The tail is judged against the tool's own typical figure (`p99 / typical`):
//! a busy poller that shares two cores with its progress thread and its peer must not see
//! the scheduler's millisecond slices in its tail.
//!
//! The machine's speed drifts, so the tests run in rounds, every test once per round, and each
//! figure is the median of its rounds.

use std::io;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Map;

use super::raw_udp;
use super::{median, perftest_bw, Measurement, Report, Unit};

/// What `softrnic perf --perftest` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Iterations of each perftest tool, and round trips of the raw ping-pong, per round.
    pub iters: u32,
    /// Rounds (see the module comment).
    pub rounds: usize,
    /// The server's address (its device).
    pub server: IpAddr,
    /// The client's address (its device).
    pub client: IpAddr,
    /// How long each bandwidth run sends (`ib_write_bw -D`, whole seconds, at least one).
    pub secs: Duration,
}

/// A perftest latency tool, its report key, and whether its figure is a whole round trip.
struct Tool {
    program: &'static str,
    key: &'static str,
    round_trip: bool,
}

const TOOLS: [Tool; 3] = [
    Tool {
        program: "ib_send_lat",
        key: "perftest_send_lat",
        round_trip: false,
    },
    Tool {
        program: "ib_write_lat",
        key: "perftest_write_lat",
        round_trip: false,
    },
    Tool {
        program: "ib_read_lat",
        key: "perftest_read_lat",
        round_trip: true,
    },
];

/// The figures of one perftest run, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// The smallest (`t_min`).
    pub min: f64,
    /// The median (`t_typical`).
    pub typical: f64,
    /// The mean (`t_avg`).
    pub avg: f64,
    /// The 99th percentile (`99%`).
    pub p99: f64,
}

/// Runs every tool of the module comment with `bin` (this `softrnic` executable).
///
/// # Errors
/// perftest is not installed, a tool failed, or its output had no result line.
pub fn run(bin: &Path, o: &Options) -> io::Result<Report> {
    if !Path::new("/usr/bin/ib_send_lat").exists() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "perftest is not installed (Debian: apt-get install perftest)",
        ));
    }
    // A port of its own per run: a server that has just exited leaves its port in TIME_WAIT.
    let mut runs_started = 0u16;
    let mut next_port = || {
        runs_started = runs_started.wrapping_add(1);
        18_700 + runs_started % 10_000
    };
    let (mut raw_rtt, mut raw_tail) = (Vec::new(), Vec::new());
    let mut runs: [Vec<Latency>; TOOLS.len()] = Default::default();
    for _ in 0..o.rounds {
        let raw = raw_udp::udp_pingpong(&raw_udp::LatConfig {
            iters: o.iters as usize,
            ..Default::default()
        })?;
        raw_rtt.push(raw.rtt.median_us);
        raw_tail.push(raw.rtt.p99_us / raw.rtt.median_us);
        for (tool, runs) in TOOLS.iter().zip(&mut runs) {
            runs.push(run_tool(bin, tool.program, next_port(), o)?);
        }
    }
    let (rtt, tail) = (median(&raw_rtt), median(&raw_tail));
    let mut report = Report::default();
    report
        .lines
        .push(raw_line("raw_udp_rtt", "round trip", rtt, tail));
    report.lines.push(raw_line(
        "raw_udp_one_way",
        "one way (half the round trip)",
        rtt / 2.0,
        tail,
    ));
    for (tool, runs) in TOOLS.iter().zip(&runs) {
        report.lines.push(tool_line(tool, runs));
    }
    report.lines.extend(perftest_bw::run(bin, o, next_port)?);
    Ok(report)
}

/// A raw UDP baseline line: the median of the rounds' median round trips, or half of it;
/// `tail` is the median of the rounds' p99 / median, the machine's own tail, beside which
/// a tool's `p99_over_typical` is read.
fn raw_line(key: &'static str, what: &str, us: f64, tail: f64) -> Measurement {
    Measurement {
        key: key.to_owned(),
        label: format!("raw UDP 64 B busy-poll ping-pong, {what}"),
        value: us,
        unit: Unit::Us,
        detail: format!("median; p99 = {tail:.1}x the median"),
        baseline: None,
        paired: None,
        fields: Map::from_iter([
            ("median_us".to_owned(), us.into()),
            ("p99_over_median".to_owned(), tail.into()),
        ]),
    }
}

/// A tool's line: its typical figure (the median of the rounds') against the raw baseline,
/// with its tail.
fn tool_line(tool: &Tool, runs: &[Latency]) -> Measurement {
    let pick = |f: fn(&Latency) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    let l = Latency {
        min: pick(|l| l.min),
        typical: pick(|l| l.typical),
        avg: pick(|l| l.avg),
        p99: pick(|l| l.p99),
    };
    let tail = l.p99 / l.typical;
    Measurement {
        key: tool.key.to_owned(),
        label: format!("perftest {} -s 64 (typical)", tool.program),
        value: l.typical,
        unit: Unit::Us,
        detail: format!(
            "min {:.2}, avg {:.2}, p99 {:.2} = {tail:.1}x typical; median of {} rounds",
            l.min,
            l.avg,
            l.p99,
            runs.len()
        ),
        baseline: Some(
            if tool.round_trip {
                "raw_udp_rtt"
            } else {
                "raw_udp_one_way"
            }
            .to_owned(),
        ),
        paired: None,
        fields: Map::from_iter([
            ("min_us".to_owned(), l.min.into()),
            ("typical_us".to_owned(), l.typical.into()),
            ("avg_us".to_owned(), l.avg.into()),
            ("p99_us".to_owned(), l.p99.into()),
            ("p99_over_typical".to_owned(), tail.into()),
            ("rounds".to_owned(), runs.len().into()),
        ]),
    }
}

/// Runs latency tool `program` (64 bytes, `o.iters` iterations) as server and client; the
/// client's figures.
fn run_tool(bin: &Path, program: &str, port: u16, o: &Options) -> io::Result<Latency> {
    let args = ["-x", "1", "-s", "64", "-n", &o.iters.to_string()].map(str::to_owned);
    let out = run_pair(bin, program, &args, port, o)?;
    parse(&out).ok_or_else(|| io::Error::other(format!("{program}: no result line in {out:?}")))
}

/// Runs `program args -p port` through `bin run` as server and client, each on its own
/// address, and returns what the client printed once both have exited. The client starts
/// half a second after the server, which listens for perftest's TCP exchange once its
/// device is open. A run whose clock calibration failed ([`clock_calibration_failed`]) is
/// run again, up to [`ATTEMPTS`] times.
pub(super) fn run_pair(
    bin: &Path,
    program: &str,
    args: &[String],
    port: u16,
    o: &Options,
) -> io::Result<String> {
    let mut attempt = 1;
    loop {
        match run_pair_once(bin, program, args, port, o) {
            Err((e, stderr)) if clock_calibration_failed(&stderr) && attempt < ATTEMPTS => {
                eprintln!("softrnic: {e}; running it again");
                attempt += 1;
            }
            r => return r.map_err(|(e, _)| e),
        }
    }
}

/// How many times [`run_pair`] runs a pair whose clock calibration failed.
const ATTEMPTS: usize = 3;

/// Whether a perftest client failed because it could not calibrate the CPU clock it times
/// with: it samples cycles against `gettimeofday` and gives up when the two do not line up
/// (`Correlation coefficient r^2: ... < 0.9`, then `Can't produce a report`), which a busy or
/// virtual machine's descheduled moments cause now and then. Nothing softrnic did: the run
/// is worth running again.
fn clock_calibration_failed(stderr: &str) -> bool {
    stderr.contains("Correlation coefficient r^2")
}

/// [`run_pair`]'s one run; on failure, the error and the client's standard error.
fn run_pair_once(
    bin: &Path,
    program: &str,
    args: &[String],
    port: u16,
    o: &Options,
) -> Result<String, (io::Error, String)> {
    let command = |addr: IpAddr| {
        let mut c = Command::new(bin);
        c.args(["run", "--addr", &addr.to_string(), "--", program])
            .args(args)
            .args(["-p", &port.to_string()])
            .stdin(Stdio::null());
        c
    };
    let mut server = command(o.server)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| (e, String::new()))?;
    std::thread::sleep(Duration::from_millis(500));
    let client = command(o.client).arg(o.server.to_string()).output();
    let served = server.wait().map_err(|e| (e, String::new()))?;
    let client = client.map_err(|e| (e, String::new()))?;
    if !client.status.success() || !served.success() {
        let stderr = String::from_utf8_lossy(&client.stderr).into_owned();
        let e = io::Error::other(format!(
            "{program} failed (client {}, server {served}): {stderr}",
            client.status,
        ));
        return Err((e, stderr));
    }
    Ok(String::from_utf8_lossy(&client.stdout).into_owned())
}

/// The numbers of the line after the first line of perftest's report `out` that contains
/// `header` (perftest prints its result as a header line and a line of figures); `None` if
/// there is no such line or it is not all numbers.
pub(super) fn figures_after(out: &str, header: &str) -> Option<Vec<f64>> {
    let mut lines = out.lines().skip_while(|l| !l.contains(header));
    lines.next()?;
    lines
        .next()?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()
}

/// The result line of perftest's latency report: the line after the header that names
/// `t_typical` (`#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%`).
pub fn parse(out: &str) -> Option<Latency> {
    let v = figures_after(out, "t_typical")?;
    (v.len() >= 8).then(|| Latency {
        min: v[2],
        typical: v[4],
        avg: v[5],
        p99: v[7],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tail of `ib_write_lat`'s report as perftest 4.5 prints it.
    const REPORT: &str = "\
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      20000          12.41          4281.10      31.75    \t       64.12       \t225.22 \t\t1484.27 \t\t2538.27
---------------------------------------------------------------------------------------
";

    #[test]
    fn the_result_line_follows_the_header() {
        let l = parse(REPORT).expect("a result line");
        assert_eq!(
            l,
            Latency {
                min: 12.41,
                typical: 31.75,
                avg: 64.12,
                p99: 1484.27
            }
        );
        assert_eq!(parse("no report here"), None);
        assert_eq!(parse(" t_typical\n not numbers\n"), None);
    }

    /// What `ib_write_bw` printed when its clock calibration failed on this VM is a reason to
    /// run it again; another failure is not.
    #[test]
    fn a_failed_clock_calibration_is_run_again_and_nothing_else() {
        let calibration = "Correlation coefficient r^2: 0.612221 < 0.9\nCan't produce a report\n";
        assert!(clock_calibration_failed(calibration));
        assert!(!clock_calibration_failed(
            "Couldn't connect to 127.0.0.1:18515\nUnable to open file descriptor for socket connection"
        ));
        assert!(!clock_calibration_failed(""));
    }

    #[test]
    fn a_tool_line_is_judged_against_its_baseline_and_its_own_typical() {
        let runs = [
            Latency {
                min: 1.0,
                typical: 4.0,
                avg: 5.0,
                p99: 8.0,
            },
            Latency {
                min: 2.0,
                typical: 6.0,
                avg: 7.0,
                p99: 30.0,
            },
            Latency {
                min: 1.5,
                typical: 5.0,
                avg: 6.0,
                p99: 10.0,
            },
        ];
        let m = tool_line(&TOOLS[2], &runs);
        assert_eq!(m.value, 5.0);
        assert_eq!(m.baseline.as_deref(), Some("raw_udp_rtt"));
        assert_eq!(m.fields["p99_over_typical"], 2.0);
        let mut report = Report::default();
        report
            .lines
            .push(raw_line("raw_udp_rtt", "round trip", 4.0, 2.5));
        report.lines.push(m);
        assert_eq!(report.ratio_to_baseline(&report.lines[1]), Some(1.25));
        assert_eq!(
            tool_line(&TOOLS[0], &runs).baseline.as_deref(),
            Some("raw_udp_one_way")
        );
    }
}

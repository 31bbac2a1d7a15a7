//! `softrnic perf --host`: what sharing one device among the host's processes costs
//! (`provider/src/host/`), each figure next to its baseline from the same run.
//!
//! * **Process pairs**: 1, 2, 4 and 8 pairs of processes, each pair a writer on 127.0.0.1
//!   streaming RDMA WRITEs of 64 KiB to a target on 127.0.0.2 ([`super::pair`]), all pairs at
//!   once: the aggregate throughput, judged against one pair's. Every process of one address
//!   shares its device (its own QPN block, its own socket of the steered group).
//! * **Control**: 2 pairs at once, each on two addresses of its own (no device shared), next
//!   to one pair: what two pairs cost on this machine without any sharing (two busy
//!   writers and two targets on the same cores), so that the shared figure can be read.
//! * **Restart after a crash**: how long a new pair takes from start to connected QPs when
//!   the pair that ran both devices' agents was just killed with `SIGKILL` (a bystander pair,
//!   still running, takes the agents over), judged against the same start beside a running
//!   pair with no crash before it.
//! * **A lone pair's round trip**: `softrnic pingpong` (RC SEND, 64 bytes) between two
//!   processes on a shared device, judged against the same with `SOFTRNIC_SHARED=0` (the
//!   process binds port 4791 alone, as before devices were shared): nothing may be added to
//!   the data path of a process that runs alone.
//!
//! The machine's speed drifts over seconds, so the runs go in [`Options::rounds`] rounds,
//! every test once per round (in reverse order every other round), and each figure is the
//! median of its rounds.

use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::Map;

use super::{median, Measurement, Report, Unit};

/// What `softrnic perf --host` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long each writer streams, per round.
    pub duration: Duration,
    /// Round trips of each ping-pong run.
    pub iters: u32,
    /// Rounds (see the module comment).
    pub rounds: usize,
}

/// The pair counts measured, with their report keys.
const PAIRS: [(usize, &str); 4] = [
    (1, "host_write_1_pair"),
    (2, "host_write_2_pairs"),
    (4, "host_write_4_pairs"),
    (8, "host_write_8_pairs"),
];

const WRITER: &str = "127.0.0.1";
const TARGET: &str = "127.0.0.2";

/// Runs every test of the module comment with `bin` (this `softrnic` executable).
///
/// # Errors
/// A process could not start or failed.
pub fn run(bin: &Path, o: &Options) -> io::Result<Report> {
    let mut gbit: [Vec<f64>; PAIRS.len()] = Default::default();
    let mut rtt_shared = Vec::new();
    let mut rtt_alone = Vec::new();
    let mut apart = Vec::new();
    let (mut start_clean, mut start_crash) = (Vec::new(), Vec::new());
    for round in 0..o.rounds.max(1) {
        let mut order: Vec<usize> = (0..PAIRS.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            gbit[i].push(write_pairs(bin, PAIRS[i].0, false, o.duration)?);
        }
        apart.push(write_pairs(bin, 2, true, o.duration)?);
        start_clean.push(start_ms(bin, false)?);
        start_crash.push(start_ms(bin, true)?);
        let mut both = [(true, &mut rtt_shared), (false, &mut rtt_alone)];
        if round % 2 == 1 {
            both.reverse();
        }
        for (shared, into) in both {
            into.push(pingpong_us(bin, shared, o.iters)?);
        }
    }
    let mut report = Report::default();
    for ((pairs, key), runs) in PAIRS.iter().zip(&gbit) {
        let label = format!("RC WRITE 64 KiB, {pairs} process pair(s) at once");
        let mut line = median_line(
            (key, &label),
            runs,
            (Unit::GbitPerSec, "gbit_per_s"),
            "aggregate, median of {} rounds",
            (*pairs > 1).then_some(PAIRS[0].1),
        );
        line.fields.insert("pairs".to_owned(), (*pairs).into());
        report.lines.push(line);
    }
    report.lines.push(median_line(
        (
            "host_write_2_pairs_apart",
            "RC WRITE 64 KiB, 2 pairs on 4 devices (none shared)",
        ),
        &apart,
        (Unit::GbitPerSec, "gbit_per_s"),
        "aggregate, median of {} rounds: the cost of 2 pairs without sharing",
        Some(PAIRS[0].1),
    ));
    const STARTED: &str = "from spawning both processes to both QPs in RTS, median of {} rounds";
    const PINGPONG: &str = "softrnic pingpong, median of {} rounds";
    for (name, runs, unit, detail, baseline) in [
        (
            (
                "host_start_beside_a_pair",
                "A pair starts and connects beside a running pair",
            ),
            &start_clean,
            (Unit::Ms, "ms"),
            STARTED,
            None,
        ),
        (
            (
                "host_start_after_kill",
                "The same right after kill -9 of the agents' pair",
            ),
            &start_crash,
            (Unit::Ms, "ms"),
            STARTED,
            Some("host_start_beside_a_pair"),
        ),
        (
            (
                "host_pingpong_alone",
                "RC SEND 64 B ping-pong, 2 processes, SOFTRNIC_SHARED=0",
            ),
            &rtt_alone,
            (Unit::UsPerIter, "us_per_iter"),
            PINGPONG,
            None,
        ),
        (
            (
                "host_pingpong_shared",
                "RC SEND 64 B ping-pong, 2 processes, shared devices",
            ),
            &rtt_shared,
            (Unit::UsPerIter, "us_per_iter"),
            PINGPONG,
            Some("host_pingpong_alone"),
        ),
    ] {
        report
            .lines
            .push(median_line(name, runs, unit, detail, baseline));
    }
    Ok(report)
}

/// The line of a figure measured once per round: the median of `runs`, in `unit`, with the
/// figure as `field` and every round as `rounds_<field>` in JSON; `{}` in `detail` is the
/// number of rounds.
fn median_line(
    (key, label): (&'static str, &str),
    runs: &[f64],
    (unit, field): (Unit, &str),
    detail: &str,
    baseline: Option<&'static str>,
) -> Measurement {
    let value = median(runs);
    Measurement {
        key: key.to_owned(),
        label: label.to_owned(),
        value,
        unit,
        detail: detail.replace("{}", &runs.len().to_string()),
        baseline: baseline.map(str::to_owned),
        paired: None,
        fields: Map::from_iter([
            (field.to_owned(), value.into()),
            (format!("rounds_{field}"), runs.to_vec().into()),
        ]),
    }
}

/// A process of a pair, its input and output piped to this one.
struct Peer {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl Peer {
    fn start(bin: &Path, role: &str, bind: &str, secs: Duration) -> io::Result<Peer> {
        let mut child = Command::new(bin)
            .args(["perf-pair", role, "--bind", bind, "--secs"])
            .arg(secs.as_secs_f64().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let input = child.stdin.take();
        let output = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Peer {
            child,
            input,
            output,
        })
    }

    fn line(&mut self) -> io::Result<String> {
        let mut l = String::new();
        if self.output.read_line(&mut l)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a perf-pair process ended early (its error is above)",
            ));
        }
        Ok(l)
    }

    fn say(&mut self, line: &str) -> io::Result<()> {
        let input = self.input.as_mut().expect("open until the end");
        input.write_all(line.as_bytes())?;
        input.flush()
    }

    /// Closes its input (the target's signal to end) and waits for it.
    fn finish(mut self) -> io::Result<()> {
        drop(self.input.take());
        let status = self.child.wait()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "a perf-pair process failed: {status}"
            )))
        }
    }
}

/// A writer and its target, connected (both QPs in RTS), the writer waiting for `go`.
struct Pair {
    writer: Peer,
    target: Peer,
}

impl Pair {
    fn connect(bin: &Path, writer: &str, target: &str, secs: Duration) -> io::Result<Pair> {
        let mut w = Peer::start(bin, "writer", writer, secs)?;
        let mut t = Peer::start(bin, "target", target, secs)?;
        let (wl, tl) = (w.line()?, t.line()?);
        w.say(&tl)?;
        t.say(&wl)?;
        for p in [&mut w, &mut t] {
            let l = p.line()?;
            if l.trim() != "ready" {
                return Err(io::Error::other(format!("expected ready, got {l:?}")));
            }
        }
        Ok(Pair {
            writer: w,
            target: t,
        })
    }

    /// Lets the writer stream for its (short) time, then ends both.
    fn finish(mut self) -> io::Result<()> {
        self.writer.say("go\n")?;
        self.writer.line()?;
        self.writer.finish()?;
        self.target.finish()
    }
}

/// Milliseconds from spawning a pair between the two shared devices to both of its QPs
/// connected, beside a running bystander pair. With `after_kill`, a first pair, which runs
/// both devices' agents (the first process on a device runs its agent), is killed with
/// `SIGKILL` right before: the new pair's processes join while the bystander's take the
/// agents over.
fn start_ms(bin: &Path, after_kill: bool) -> io::Result<f64> {
    const BRIEF: Duration = Duration::from_millis(10);
    let victim = match after_kill {
        true => Some(Pair::connect(bin, WRITER, TARGET, BRIEF)?),
        false => None,
    };
    let bystander = Pair::connect(bin, WRITER, TARGET, BRIEF)?;
    if let Some(mut v) = victim {
        for p in [&mut v.writer, &mut v.target] {
            p.child.kill()?;
            p.child.wait()?;
        }
    }
    let start = std::time::Instant::now();
    let new = Pair::connect(bin, WRITER, TARGET, BRIEF)?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    new.finish()?;
    bystander.finish()?;
    Ok(ms)
}

/// `pairs` WRITE pairs at once for `secs`: the sum of their Gbit/s. All between the same
/// two devices, or (`apart`) each pair on two addresses of its own, sharing no device.
fn write_pairs(bin: &Path, pairs: usize, apart: bool, secs: Duration) -> io::Result<f64> {
    let mut all = Vec::with_capacity(pairs);
    for i in 0..pairs {
        let (writer, target) = if apart {
            (
                format!("127.0.45.{}", 2 * i + 1),
                format!("127.0.45.{}", 2 * i + 2),
            )
        } else {
            (WRITER.to_string(), TARGET.to_string())
        };
        all.push(Pair::connect(bin, &writer, &target, secs)?);
    }
    for pair in &mut all {
        pair.writer.say("go\n")?;
    }
    let mut gbit = 0.0;
    for Pair {
        writer: mut w,
        target: t,
    } in all
    {
        let l = w.line()?;
        let f: Vec<f64> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let [bytes, ns] = f[..] else {
            return Err(io::Error::other(format!("a malformed result: {l:?}")));
        };
        gbit += bytes * 8.0 / ns;
        w.finish()?;
        t.finish()?;
    }
    Ok(gbit)
}

/// One `softrnic pingpong` of `iters` 64-byte round trips between two processes, shared
/// devices or not: its µs per iteration.
fn pingpong_us(bin: &Path, shared: bool, iters: u32) -> io::Result<f64> {
    let spawn = |args: &[&str]| {
        Command::new(bin)
            .arg("pingpong")
            .args(args)
            .args(["--size", "64", "-n", &iters.to_string()])
            .env("SOFTRNIC_SHARED", if shared { "1" } else { "0" })
            .stdout(Stdio::piped())
            .spawn()
    };
    let mut server = spawn(&["--bind", TARGET, "--port", "0"])?;
    let mut first = String::new();
    let mut out = BufReader::new(server.stdout.take().expect("piped"));
    out.read_line(&mut first)?;
    let port = first.trim().rsplit(':').next().unwrap_or("").to_string();
    let client = spawn(&["--bind", WRITER, "--port", &port, TARGET])?;
    let report = client.wait_with_output()?;
    let _ = server.wait();
    if !report.status.success() {
        return Err(io::Error::other(
            "softrnic pingpong failed (its error is above)",
        ));
    }
    let text = String::from_utf8_lossy(&report.stdout);
    text.lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" = ")?;
            rest.strip_suffix(" usec/iter")?.trim().parse().ok()
        })
        .ok_or_else(|| io::Error::other(format!("no usec/iter line in:\n{text}")))
}

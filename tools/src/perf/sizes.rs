//! `softrnic perf --sizes 4096,16384,65536,...`: RC RDMA WRITE throughput against message
//! size, each size beside the kernel's limit for the same packets.
//!
//! For each size, two measurements right after one another, so that both see the same phase
//! of the machine (its speed drifts by tens of percent over seconds) and their ratio does not
//! measure the drift:
//!
//! - the raw baseline, `raw_udp_gso_size_<bytes>`: UDP GSO runs of the message's packets
//!   read whole with UDP GRO ([`GsoConfig::for_message`]): a message of N bytes is
//!   `ceil(N / 4096)` packets at PMTU 4096, so a run has that many segments of a packet's
//!   length, at most 15 (the most a UDP datagram holds);
//! - RC RDMA WRITEs of that size, `rc_write_size_<bytes>`, on the one QP of two devices in
//!   this process driven by one thread, 16 outstanding, as the standard `rc_write_bw` line
//!   ([`crate::demo::write_throughput`]), judged against the raw line. The devices are opened
//!   for it and closed after it, so that no raw test runs beside them.
//!
//! Small messages are bound by the work per message (a post, a completion, a system call per
//! packet), large ones by the bytes: where the two lines meet and part says what softrnic
//! adds at each end.

use std::io;
use std::time::Duration;

use super::raw_udp::{udp_gso_bandwidth, GsoConfig};
use super::{loopback_rig, parse_list, rc_write_line, size_text, warmup, Measurement, RIG_MEM};
use crate::demo;

/// The largest message `--sizes` takes: one the rig's buffer holds.
pub const MAX_SIZE: usize = RIG_MEM;

/// Most sizes one `--sizes` takes.
pub const MAX_SIZES: usize = 12;

/// The sizes `--all` measures when `--sizes` does not say: 4 KiB (one packet) to 1 MiB.
pub const DEFAULT_SIZES: [usize; 5] = [4096, 16384, 65536, 262_144, 1 << 20];

/// Measures every size of `sizes`, each for `duration`: the raw baseline, then RC WRITE.
///
/// # Errors
/// Opening the devices, a WRITE that fails, or a raw test that fails other than by the
/// kernel refusing GSO or GRO (then the raw line says so and the ratio is missing).
pub fn run(sizes: &[usize], duration: Duration) -> io::Result<Vec<Measurement>> {
    let mut lines = Vec::with_capacity(2 * sizes.len());
    for &size in sizes {
        let cfg = GsoConfig {
            duration,
            warmup: warmup(duration),
            ..GsoConfig::for_message(size)
        };
        let raw = match udp_gso_bandwidth(&cfg) {
            Ok(r) => r.measurement(),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => cfg.refused(&e),
            Err(e) => return Err(e),
        };
        // The devices are opened only now, and closed before the next raw test: the raw
        // figure is the kernel's alone, as the standard throughput baselines' are (an open
        // device's packet ring, for one, sees every loopback packet).
        let gbit = demo::write_throughput(&loopback_rig()?, size, duration)?;
        lines.extend(size_lines(size, raw, gbit));
    }
    Ok(lines)
}

/// The two lines of one size: `raw` (a `raw_udp_gso_bw` line of that size's runs) renamed
/// for the size, and RC WRITE's `gbit` judged against it.
fn size_lines(size: usize, mut raw: Measurement, gbit: f64) -> [Measurement; 2] {
    raw.key = format!("raw_udp_gso_size_{size}");
    raw.label = format!("{} ({} WRITE)", raw.label, size_text(size));
    raw.fields.insert("message_len".to_owned(), size.into());
    let rc = rc_write_line(&format!("rc_write_size_{size}"), size, gbit, &raw.key);
    [raw, rc]
}

/// The message sizes of `--sizes`, in bytes, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageSizes(pub Vec<usize>);

/// Parses `4096,65536`: sizes from 1 to [`MAX_SIZE`] bytes, each once, at most
/// [`MAX_SIZES`] of them.
///
/// # Errors
/// A word that is not such a size, one given twice, or too many.
pub fn parse_sizes(s: &str) -> Result<MessageSizes, String> {
    let sizes = parse_list(s, 1..=MAX_SIZE, MAX_SIZES, "message size")?;
    if let Some(n) = sizes
        .iter()
        .enumerate()
        .find_map(|(i, n)| sizes[..i].contains(n).then_some(n))
    {
        return Err(format!("{n} is given twice"));
    }
    Ok(MessageSizes(sizes))
}

#[cfg(test)]
mod tests {
    use super::super::{Report, Unit};
    use super::*;

    #[test]
    fn sizes_parse_within_the_buffer_each_once() {
        assert_eq!(
            parse_sizes("4096, 65536,1"),
            Ok(MessageSizes(vec![4096, 65536, 1]))
        );
        assert!(parse_sizes("0").is_err());
        assert!(parse_sizes(&(MAX_SIZE + 1).to_string()).is_err());
        assert!(parse_sizes("4096,x").is_err());
        assert!(parse_sizes("4096,8192,4096").is_err());
        let thirteen: Vec<String> = (1..=13).map(|n| (n * 4096).to_string()).collect();
        assert!(parse_sizes(&thirteen.join(",")).is_err());
    }

    #[test]
    fn the_rc_line_of_a_size_is_judged_against_the_raw_line_of_that_size() {
        // A raw line as a GSO run of 16 KiB's packets makes it, with a figure put in.
        let mut raw = GsoConfig::for_message(16384).refused(&io::Error::other("test"));
        raw.value = 8.0;
        let [raw, rc] = size_lines(16384, raw, 2.0);
        assert_eq!(raw.key, "raw_udp_gso_size_16384");
        assert_eq!(
            raw.label,
            "raw UDP  4 x 4112 B GSO send, GRO receive (16 KiB WRITE)"
        );
        assert_eq!(raw.fields["message_len"], 16384);
        assert_eq!(rc.key, "rc_write_size_16384");
        assert_eq!(rc.label, "RC RDMA WRITE 16 KiB, PMTU 4096, 1 QP");
        assert_eq!(rc.unit, Unit::GbitPerSec);
        assert_eq!(rc.baseline.as_deref(), Some("raw_udp_gso_size_16384"));
        assert_eq!(rc.fields["message_len"], 16384);
        assert_eq!(rc.fields["gbit_per_s"], 2.0);
        let report = Report {
            lines: vec![raw, rc],
        };
        assert_eq!(report.ratio_to_baseline(&report.lines[1]), Some(0.25));
    }
}

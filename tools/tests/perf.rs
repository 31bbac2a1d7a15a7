//! The raw UDP baseline on tiny runs: the figures hang together (bytes, datagrams and loss add
//! up, every round trip is recorded, percentiles are ordered). No assertion is about how fast
//! anything is.

use std::sync::Mutex;
use std::time::Duration;

use softrnic_tools::perf::raw_udp::{
    udp_bandwidth, udp_gso_bandwidth, udp_pingpong, BwConfig, GsoConfig, LatConfig,
};

/// The machine has two cores and every test here keeps both busy: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn tiny_bw(datagram_len: usize, batch: usize) -> BwConfig {
    BwConfig {
        datagram_len,
        batch,
        warmup: Duration::from_millis(20),
        duration: Duration::from_millis(100),
        ..Default::default()
    }
}

#[test]
fn bandwidth_counts_whole_datagrams_and_loss_adds_up() {
    let _one = serial();
    let r = udp_bandwidth(&tiny_bw(4096, 32)).unwrap();
    assert_eq!(r.datagram_len, 4096);
    assert!(r.bytes > 0, "{r:?}");
    assert_eq!(r.bytes % 4096, 0, "{r:?}");
    assert_eq!(r.bytes, r.datagrams * 4096, "{r:?}");
    assert!(r.datagrams <= r.sent, "more received than sent: {r:?}");
    assert_eq!(r.lost, r.sent - r.datagrams, "{r:?}");
    assert!((0.0..=1.0).contains(&r.loss_ratio()), "{r:?}");
    assert!(r.gbit_per_s.is_finite() && r.gbit_per_s >= 0.0, "{r:?}");
    assert!(r.sndbuf > 0 && r.rcvbuf > 0, "{r:?}");
}

#[test]
fn bandwidth_takes_other_sizes_and_batches() {
    let _one = serial();
    let r = udp_bandwidth(&tiny_bw(1000, 7)).unwrap();
    assert!(r.datagrams > 0, "{r:?}");
    assert_eq!(r.bytes, r.datagrams * 1000, "{r:?}");
}

#[test]
fn bandwidth_refuses_impossible_configs() {
    for cfg in [tiny_bw(0, 32), tiny_bw(70_000, 32), tiny_bw(4096, 0)] {
        let e = udp_bandwidth(&cfg).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{cfg:?}");
    }
}

fn tiny_gso() -> GsoConfig {
    GsoConfig {
        sender: "127.0.72.1:0".parse().unwrap(),
        receiver: "127.0.72.2:0".parse().unwrap(),
        warmup: Duration::from_millis(20),
        duration: Duration::from_millis(200),
        ..Default::default()
    }
}

/// Runs come whole through GRO (more than one segment each), and every segment counts its
/// full 4112 bytes.
#[test]
fn gso_reads_whole_runs_and_counts_every_segment() {
    let _one = serial();
    let r = match udp_gso_bandwidth(&tiny_gso()) {
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            softrnic_testkit::skip(
                "gso_reads_whole_runs_and_counts_every_segment",
                &e.to_string(),
            );
            return;
        }
        r => r.unwrap(),
    };
    assert_eq!((r.segment_len, r.segments_per_run), (4112, 15));
    assert!(r.runs > 0, "{r:?}");
    assert!(r.largest_run > 1 && r.largest_run <= 15, "{r:?}");
    assert!(
        r.datagrams > r.runs,
        "no run of more than one segment: {r:?}"
    );
    assert!(r.datagrams <= r.runs * 15, "{r:?}");
    assert_eq!(r.bytes, r.datagrams * 4112, "{r:?}");
    assert_eq!(r.sent, r.sent_runs * 15, "{r:?}");
    assert!(r.datagrams <= r.sent, "more received than sent: {r:?}");
    assert_eq!(r.lost, r.sent - r.datagrams, "{r:?}");
    assert!(r.gbit_per_s.is_finite() && r.gbit_per_s >= 0.0, "{r:?}");

    let m = r.measurement();
    assert_eq!(m.key, "raw_udp_gso_bw");
    assert_eq!(m.label, "raw UDP  15 x 4112 B GSO send, GRO receive");
    assert_eq!(m.fields["runs"], r.runs);
    assert_eq!(m.fields["datagrams"], r.datagrams);
}

#[test]
fn gso_refuses_impossible_configs() {
    let runs_too_long = GsoConfig {
        segments: 16,
        ..tiny_gso()
    };
    let no_segment = GsoConfig {
        segment_len: 0,
        ..tiny_gso()
    };
    let no_batch = GsoConfig {
        batch: 0,
        ..tiny_gso()
    };
    for cfg in [runs_too_long, no_segment, no_batch] {
        let e = udp_gso_bandwidth(&cfg).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{cfg:?}");
    }
}

/// A message of N bytes is ceil(N / 4096) packets of BTH + 4096 + ICRC bytes (a shorter one
/// is one packet of its own length), and a run holds at most 15 of them.
#[test]
fn a_message_is_sent_as_runs_of_its_packets() {
    let run = |len| {
        let c = GsoConfig::for_message(len);
        (c.segments, c.segment_len)
    };
    assert_eq!(run(100), (1, 116));
    assert_eq!(run(4096), (1, 4112));
    assert_eq!(run(4097), (2, 4112));
    assert_eq!(run(16384), (4, 4112));
    assert_eq!(run(61440), (15, 4112));
    assert_eq!(run(65536), (15, 4112));
    assert_eq!(run(1 << 20), (15, 4112));
    let sixty_four = GsoConfig::for_message(65536);
    assert_eq!(sixty_four.label(), GsoConfig::default().label());
}

/// A kernel without UDP GSO or GRO gets a line saying so, with no figure.
#[test]
fn a_refused_gso_line_says_why_and_has_no_figure() {
    let why = std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "the kernel refuses UDP_GRO",
    );
    let m = tiny_gso().refused(&why);
    assert_eq!(m.key, "raw_udp_gso_bw");
    assert!(m.value.is_nan());
    assert!(m.detail.contains("UDP_GRO"), "{}", m.detail);
    assert!(m.fields["gbit_per_s"].is_null());
    assert_eq!(m.fields["unsupported"], "the kernel refuses UDP_GRO");
}

#[test]
fn pingpong_records_every_round_trip() {
    let _one = serial();
    let r = udp_pingpong(&LatConfig {
        iters: 200,
        warmup: 10,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(r.rtt.ns.len(), 200);
    assert!(r.rtt.ns.windows(2).all(|w| w[0] <= w[1]), "not sorted");
    assert!(r.rtt.mean_us > 0.0, "{}", r.rtt.mean_us);
    assert!(
        r.rtt.median_us <= r.rtt.p99_us,
        "{} > {}",
        r.rtt.median_us,
        r.rtt.p99_us
    );
    let (min, max) = (r.rtt.ns[0] as f64 / 1e3, r.rtt.ns[199] as f64 / 1e3);
    assert!(
        min <= r.rtt.mean_us && r.rtt.mean_us <= max,
        "{min} {} {max}",
        r.rtt.mean_us
    );
    assert!(min <= r.rtt.median_us && r.rtt.p99_us <= max);
}

#[test]
fn pingpong_refuses_impossible_configs() {
    let short = LatConfig {
        datagram_len: 4,
        ..Default::default()
    };
    let none = LatConfig {
        iters: 0,
        ..Default::default()
    };
    for cfg in [short, none] {
        let e = udp_pingpong(&cfg).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{cfg:?}");
    }
}

//! The engine's events (`provider/src/trace.rs`) say what happened, with the QP's number: its
//! state changes, a lost packet's local ACK timeout and the resend, and an RNR NAK sent by one
//! side and received by the other. Each scenario runs on the in-memory fabric with a
//! subscriber that records every event of this thread.
#![cfg(feature = "trace")]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::wrs::{remote_of, send_wr, sge_of};
use common::*;
use softrnic_provider::mr::Access;
use softrnic_provider::transport::FabricConfig;
use softrnic_provider::wc::WcStatus;
use softrnic_provider::wr::{RemoteAddr, SendOpcode};

const ALL: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

/// A writer into a shared buffer, for the subscriber.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<u8>>>);

impl Write for Recorded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `scenario` with every event at `trace` level and below recorded; returns them, one
/// per line.
fn recording(scenario: impl FnOnce()) -> String {
    let out = Recorded::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("softrnic=trace")
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, scenario);
    let bytes = out.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

/// The recorded lines that contain every one of `words`.
fn lines_with<'a>(log: &'a str, words: &[&str]) -> Vec<&'a str> {
    log.lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .collect()
}

#[test]
fn connecting_shows_each_state_change_of_both_qps() {
    let log = recording(|| {
        let _ = Pair::new(FabricConfig::default(), 1, Connect::default());
    });
    for qpn in [0x11, 0x22] {
        let q = format!("qpn={qpn}");
        for (from, to) in [("Reset", "Init"), ("Init", "Rtr"), ("Rtr", "Rts")] {
            let want = [
                q.as_str(),
                "state change",
                &format!("from={from}"),
                &format!("to={to}"),
            ];
            assert_eq!(lines_with(&log, &want).len(), 1, "{want:?} in:\n{log}");
        }
    }
}

#[test]
fn a_lost_write_shows_the_timeout_and_the_resend_from_its_psn() {
    let c = Connect {
        timeout: 14,
        ..Connect::default()
    };
    let log = recording(|| {
        let mut p = Pair::new(FabricConfig::default(), 2, c);
        let a_mem = p.a.region(4096, ALL);
        let b_mem = p.b.region(4096, ALL);
        p.fabric.set_config(FabricConfig {
            loss: 1.0,
            ..FabricConfig::default()
        });
        let write = send_wr(
            1,
            SendOpcode::RdmaWrite,
            vec![sge_of(&a_mem, 0, 64)],
            remote_of(&b_mem, 0),
        );
        p.a.qp.post_send(&write, &p.a.mrs).unwrap();
        p.step();
        p.fabric.set_config(FabricConfig::default());
        p.run_until(100_000, |p| !p.a.send_wcs.is_empty());
        assert_eq!(p.a.send_wcs[0].status, WcStatus::Success);
    });
    let psn = format!("psn={}", Connect::default().a_psn);
    assert!(
        !lines_with(&log, &["qpn=17", "local ACK timeout", &psn]).is_empty(),
        "the timeout, with the lost PSN:\n{log}"
    );
    assert!(
        !lines_with(&log, &["qpn=17", "resend from PSN", &psn]).is_empty(),
        "the resend, from the lost PSN:\n{log}"
    );
    assert!(
        lines_with(&log, &["NAK"]).is_empty(),
        "no NAK was sent:\n{log}"
    );
}

#[test]
fn an_rnr_nak_shows_on_both_sides() {
    let c = Connect {
        min_rnr_timer: 1,
        rnr_retry: 7,
        ..Connect::default()
    };
    let log = recording(|| {
        let mut p = Pair::new(FabricConfig::default(), 3, c);
        let a_mem = p.a.region(4096, ALL);
        let send = send_wr(
            1,
            SendOpcode::Send,
            vec![sge_of(&a_mem, 0, 100)],
            RemoteAddr::default(),
        );
        p.a.qp.post_send(&send, &p.a.mrs).unwrap();
        p.run_until(1000, |p| p.a.seen.iter().any(|s| s.syndrome.is_some()));
    });
    assert!(
        !lines_with(&log, &["qpn=34", "RNR NAK sent"]).is_empty(),
        "the responder's RNR NAK:\n{log}"
    );
    assert!(
        !lines_with(&log, &["qpn=17", "RNR NAK received"]).is_empty(),
        "the requester's:\n{log}"
    );
}

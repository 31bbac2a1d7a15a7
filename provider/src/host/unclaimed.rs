//! REQs (and SIDR_REQs) for a Service ID nobody listens on yet, held by the agent for a
//! moment before it rejects them (reason 8, Invalid Service ID, IBTA 12.6.7.2).
//!
//! **Why.** A listen here is a round trip to the agent (`cm_link.rs`), where the kernel's
//! rdma_cm listens with one system call. Programs that start listening just as their peer
//! connects, after a handshake of their own, then lose a race they win on kernel rdma_cm:
//! perftest's `-R` server sets up its data listener only after the last exchange on its
//! setup connection, while the client connects as soon as it has read it, and perftest
//! 4.5-0.17 cannot recover from the REJ (its retry reuses ids it destroyed). So a REQ for no
//! listener waits here up to [`LISTEN_GRACE`]; a listen for its Service ID within that time
//! takes it, as if the listener had come first (debug builds of perftest's server, on a
//! two-core machine, took a few milliseconds from their handshake to their listen).
//! Otherwise it gets its REJ [`LISTEN_GRACE`] later than at once: the peer still hears
//! "refused" long before its CM response timeout (seconds).
//!
//! At most [`CAPACITY`] wait; beyond that (a flood of REQs for nobody) a REQ is rejected at
//! once, so memory stays bounded.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use softrnic_wire::mad::MAD_LEN;

/// How long a REQ for no listener waits for one.
pub const LISTEN_GRACE: Duration = Duration::from_millis(100);

/// The most REQs that wait at once.
pub const CAPACITY: usize = 256;

/// A held REQ: its Service ID, sender and MAD, and when it came.
struct Held {
    service: u64,
    from: IpAddr,
    mad: [u8; MAD_LEN],
    since: Instant,
}

/// The REQs waiting for a listener, oldest first.
#[derive(Default)]
pub struct Unclaimed {
    held: VecDeque<Held>,
}

impl Unclaimed {
    /// Holds the REQ `mad` from `from` for `service`; `false` if [`CAPACITY`] wait already
    /// (the caller rejects it at once).
    #[must_use]
    pub fn hold(&mut self, now: Instant, service: u64, from: IpAddr, mad: &[u8; MAD_LEN]) -> bool {
        if self.held.len() >= CAPACITY {
            return false;
        }
        self.held.push_back(Held {
            service,
            from,
            mad: *mad,
            since: now,
        });
        true
    }

    /// The REQs for `service`, which now has a listener, in the order they came.
    pub fn claim(&mut self, service: u64) -> Vec<(IpAddr, [u8; MAD_LEN])> {
        let mut claimed = Vec::new();
        self.held.retain(|h| {
            let mine = h.service == service;
            if mine {
                claimed.push((h.from, h.mad));
            }
            !mine
        });
        claimed
    }

    /// The REQs that waited [`LISTEN_GRACE`] by `now`, in the order they came.
    pub fn expired(&mut self, now: Instant) -> Vec<(IpAddr, [u8; MAD_LEN])> {
        let mut out = Vec::new();
        while let Some(h) = self.held.front() {
            if now.saturating_duration_since(h.since) < LISTEN_GRACE {
                break;
            }
            let h = self.held.pop_front().expect("a front");
            out.push((h.from, h.mad));
        }
        out
    }

    /// How long until the oldest REQ's wait ends (`None` with none waiting).
    pub fn next_expiry(&self, now: Instant) -> Option<Duration> {
        self.held
            .front()
            .map(|h| (h.since + LISTEN_GRACE).saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const PEER: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));

    fn mad(tag: u8) -> [u8; MAD_LEN] {
        [tag; MAD_LEN]
    }

    #[test]
    fn a_listen_within_the_grace_claims_its_reqs_and_only_those() {
        let t0 = Instant::now();
        let mut u = Unclaimed::default();
        assert!(u.hold(t0, 7, PEER, &mad(1)));
        assert!(u.hold(t0, 8, PEER, &mad(2)));
        assert!(u.hold(t0, 7, PEER, &mad(3)));
        let got: Vec<u8> = u.claim(7).iter().map(|(_, m)| m[0]).collect();
        assert_eq!(got, [1, 3]);
        assert!(u.claim(7).is_empty());
        assert_eq!(u.next_expiry(t0), Some(LISTEN_GRACE));
        let left: Vec<u8> = u
            .expired(t0 + LISTEN_GRACE)
            .iter()
            .map(|(_, m)| m[0])
            .collect();
        assert_eq!(left, [2]);
        assert_eq!(u.next_expiry(t0), None);
    }

    #[test]
    fn reqs_expire_oldest_first_after_the_grace() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_millis(10);
        let mut u = Unclaimed::default();
        assert!(u.hold(t0, 1, PEER, &mad(1)));
        assert!(u.hold(later, 2, PEER, &mad(2)));
        assert!(u
            .expired(t0 + LISTEN_GRACE - Duration::from_millis(1))
            .is_empty());
        assert_eq!(u.expired(t0 + LISTEN_GRACE).len(), 1);
        assert_eq!(
            u.next_expiry(t0 + LISTEN_GRACE),
            Some(Duration::from_millis(10))
        );
        assert_eq!(u.expired(later + LISTEN_GRACE).len(), 1);
    }

    #[test]
    fn a_flood_is_bounded_and_the_rest_is_refused_at_once() {
        let t0 = Instant::now();
        let mut u = Unclaimed::default();
        for i in 0..CAPACITY {
            assert!(u.hold(t0, i as u64, PEER, &mad(0)));
        }
        assert!(!u.hold(t0, 9999, PEER, &mad(9)), "full");
        assert_eq!(u.expired(t0 + LISTEN_GRACE).len(), CAPACITY);
    }
}

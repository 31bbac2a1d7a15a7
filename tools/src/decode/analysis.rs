//! Per-connection PSN bookkeeping over a capture (IBTA vol. 1 9.7 "Reliable service").
//!
//! A connection is one direction of a flow: (source address, destination address, destination
//! QP). Its requests carry consecutive PSNs (9.7.1); a responder answers in the requester's
//! PSN space (ACKs, READ responses, atomic ACKs).
//!
//! * **retransmission**: a request whose PSN was already seen on the connection: the requester
//!   sent it again, after a NAK or a timeout (9.7.5.1, 9.7.6.1).
//! * **duplicate**: a response (same opcode, PSN and syndrome) already seen: the responder
//!   answering a duplicate request again (9.7.4.1.2), or a capture holding a frame twice.
//! * **PSN gap**: a request PSN beyond the next expected one (packets lost before the capture
//!   point, or a capture that dropped them). A READ request of `len` bytes takes
//!   `ceil(len / PMTU)` PSNs (9.7.1.1); the PMTU is not on the wire, so any next PSN up to the
//!   count at the smallest PMTU (256) is in order.
//! * **messages**: Last and Only requests seen the first time (9.2.1: a message is a First,
//!   Middles and a Last of one operation, or one Only packet); **broken messages**: requests
//!   that do not fit that sequence (a capture that starts mid-message gives none: the first
//!   packet of a connection is taken as it comes).
//! * ACKs, and NAKs by kind from the AETH syndrome (9.4.1 "ACK extended transport header",
//!   table 42: PSN sequence error, invalid request, remote access error, remote operational
//!   error; RNR NAK with its timer, table 46).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use softrnic_wire::aeth::Syndrome;
use softrnic_wire::frame::Datagram;
use softrnic_wire::opcode::{Operation, Position, Transport};
use softrnic_wire::Psn;

/// What the analysis says of one packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Note {
    /// A request whose PSN was already seen.
    pub retransmission: bool,
    /// A response already seen.
    pub duplicate: bool,
    /// The packet carries a NAK or RNR NAK.
    pub nak: bool,
}

/// One direction of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Connection {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination QP.
    pub dest_qp: u32,
}

/// What was counted on one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Packets.
    pub packets: u64,
    /// Packets by opcode name.
    pub by_opcode: BTreeMap<&'static str, u64>,
    /// Packets by operation (`Send`, `RdmaWrite`, `Acknowledge`, ...).
    pub by_operation: BTreeMap<String, u64>,
    /// Messages (Last and Only requests, retransmissions excluded).
    pub messages: u64,
    /// Payload bytes (retransmissions included).
    pub bytes: u64,
    /// Requests that break the opcode sequence: a Middle or Last that continues no message
    /// of its operation, or a First or Only while a message is still open (a gap or a
    /// retransmission just before excepted).
    pub broken_messages: u64,
    /// Requests whose PSN was seen before.
    pub retransmissions: u64,
    /// Responses seen before.
    pub duplicates: u64,
    /// Requests whose PSN was beyond the next expected.
    pub psn_gaps: u64,
    /// PSNs skipped by those gaps.
    pub psns_missing: u64,
    /// ACKs (ACKNOWLEDGE and ATOMIC ACKNOWLEDGE with an ACK syndrome).
    pub acks: u64,
    /// NAKs by kind (`NAK_PSN_SEQUENCE_ERROR`, ..., `RNR_NAK timer=10us`).
    pub naks: BTreeMap<String, u64>,
}

#[derive(Debug, Default)]
struct State {
    counts: Counts,
    /// The next request PSN expected, and the last one that is still in order (more than
    /// the first after a READ request).
    next: Option<(Psn, Psn)>,
    seen: HashSet<u32>,
    /// The operation of the multi-packet request message under way.
    open: Option<Operation>,
    responses: HashSet<(u8, u32, u8)>,
}

/// The analysis of a capture, fed one datagram at a time in capture order.
#[derive(Debug, Default)]
pub struct Analysis {
    conns: BTreeMap<Connection, State>,
}

impl Analysis {
    /// Counts `d` and says what it is.
    pub fn observe(&mut self, d: &Datagram<'_>) -> Note {
        let r = &d.repr;
        let bth = &r.roce.bth;
        let key = Connection {
            src: r.ip.src_addr(),
            dst: r.ip.dst_addr(),
            dest_qp: bth.dest_qp,
        };
        let st = self.conns.entry(key).or_default();
        let c = &mut st.counts;
        c.packets += 1;
        *c.by_opcode.entry(bth.opcode.name()).or_default() += 1;
        c.bytes += r.roce.payload_len as u64;
        let mut note = Note::default();
        let Some(info) = bth.opcode.info() else {
            return note;
        };
        *c.by_operation
            .entry(format!("{:?}", info.operation))
            .or_default() += 1;
        let syndrome = r.roce.aeth.map(|a| a.syndrome);
        match syndrome {
            Some(s @ Syndrome::Nak(_)) => {
                note.nak = true;
                *c.naks.entry(s.kind().to_string()).or_default() += 1;
            }
            Some(Syndrome::RnrNak(t)) => {
                note.nak = true;
                let kind = format!("RNR_NAK timer={}us", t.micros());
                *c.naks.entry(kind).or_default() += 1;
            }
            Some(Syndrome::Ack(_))
                if matches!(
                    info.operation,
                    Operation::Acknowledge | Operation::AtomicAcknowledge
                ) =>
            {
                c.acks += 1
            }
            _ => {}
        }
        let psn = bth.psn;
        if info.transport == Transport::Cnp {
            return note;
        }
        if !info.is_request() {
            let key = (
                bth.opcode.0,
                psn.value(),
                syndrome.map_or(0, Syndrome::to_byte),
            );
            note.duplicate = !st.responses.insert(key);
            c.duplicates += u64::from(note.duplicate);
            return note;
        }
        let open_after = match info.position {
            Position::First | Position::Middle => Some(info.operation),
            Position::Last | Position::Only => None,
        };
        if !st.seen.insert(psn.value()) {
            note.retransmission = true;
            c.retransmissions += 1;
            // Go-back-N resends from any packet of a message: follow it.
            st.open = open_after;
            return note;
        }
        // PSNs are 24 bits: one half the space behind is forgotten, so that a long capture
        // that wraps does not take new packets for old ones (9.7.1: the valid window).
        st.seen.remove(&psn.sub(Psn::HALF).value());
        let mut gap = false;
        if let Some((lo, hi)) = st.next {
            if psn.cmp_modular(hi).is_gt() {
                gap = true;
                c.psn_gaps += 1;
                c.psns_missing += u64::from(psn.distance_from(lo));
            }
        }
        // After a gap the packets between are unknown: no sequence to check.
        let continues = matches!(info.position, Position::Middle | Position::Last);
        let fits = match st.open {
            Some(op) => continues && op == info.operation,
            None => !continues,
        };
        if !fits && !gap && st.next.is_some() {
            c.broken_messages += 1;
        }
        st.open = open_after;
        if st.next.is_none_or(|(lo, _)| !psn.cmp_modular(lo).is_lt()) {
            // A READ request's responses take PSNs; the requester's next PSN follows them.
            let span = match (info.operation, r.roce.reth) {
                (Operation::RdmaReadRequest, Some(reth)) => reth.dma_len.div_ceil(256).max(1),
                _ => 1,
            };
            st.next = Some((psn.add(1), psn.add(span)));
        }
        if matches!(info.position, Position::Last | Position::Only) {
            c.messages += 1;
        }
        note
    }

    /// Every connection seen, with its counts, in address order.
    pub fn connections(&self) -> impl Iterator<Item = (&Connection, &Counts)> {
        self.conns.iter().map(|(k, s)| (k, &s.counts))
    }
}

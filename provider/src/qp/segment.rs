//! Segmentation of a message into packets (IBTA 9.7.2 "Packet sequence"; 9.2.1 opcode
//! sequences).
//!
//! > "A message that is longer than the PMTU is segmented into a first packet, zero or more
//! > middle packets and a last packet; the payload of first and middle packets is exactly PMTU
//! > bytes" (IBTA C9-??, 9.7.2.1). A message of at most one PMTU, a zero-length one included,
//! > is one "only" packet.
//!
//! [`Segments`] walks a message without allocating and names each packet's opcode, its byte
//! range in the message and whether it ends the message. It serves the requester (SEND,
//! RDMA WRITE) and the responder (RDMA READ responses); an RDMA READ request or an atomic is one
//! packet, but a READ request consumes one PSN per response packet (IBTA 9.7.2.2).

use softrnic_wire::opcode::{Position, Transport};
use softrnic_wire::Opcode;

use crate::wr::SendOpcode;

/// The packet-level shape of a message: which opcode family it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// SEND, optionally with immediate data or invalidate.
    Send {
        /// The last (or only) packet carries ImmDt.
        imm: bool,
        /// The last (or only) packet carries an IETH.
        inv: bool,
    },
    /// RDMA WRITE, optionally with immediate data.
    Write {
        /// The last (or only) packet carries ImmDt.
        imm: bool,
    },
    /// RDMA READ responses (sent by the responder).
    ReadResponse,
}

impl MessageKind {
    /// The kind of a send work request's message; `None` for single-packet requests (READ
    /// request, atomics, FLUSH, ATOMIC WRITE) and local operations.
    pub fn of(op: SendOpcode) -> Option<MessageKind> {
        Some(match op {
            SendOpcode::Send => MessageKind::Send {
                imm: false,
                inv: false,
            },
            SendOpcode::SendWithImm => MessageKind::Send {
                imm: true,
                inv: false,
            },
            SendOpcode::SendWithInv => MessageKind::Send {
                imm: false,
                inv: true,
            },
            SendOpcode::RdmaWrite => MessageKind::Write { imm: false },
            SendOpcode::RdmaWriteWithImm => MessageKind::Write { imm: true },
            _ => return None,
        })
    }
}

/// Where a packet stands in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    First,
    Middle,
    Last,
    Only,
}

/// One packet of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// The BTH opcode.
    pub opcode: Opcode,
    /// Offset of the packet's payload in the message.
    pub offset: u32,
    /// Payload length.
    pub len: u32,
    /// Whether this packet ends the message.
    pub last: bool,
}

/// The packets of one message, in order.
#[derive(Debug, Clone)]
pub struct Segments {
    transport: Transport,
    kind: MessageKind,
    total: u32,
    pmtu: u32,
    offset: u32,
    done: bool,
}

impl Segments {
    /// The packets of a `total`-byte message of `kind` on `transport` (RC or UC) with path MTU
    /// `pmtu` bytes. Starting at `offset` (a multiple of `pmtu`) resumes in the middle of the
    /// message, as go-back-N does.
    pub fn new(
        transport: Transport,
        kind: MessageKind,
        total: u32,
        pmtu: u32,
        offset: u32,
    ) -> Self {
        debug_assert!(pmtu.is_power_of_two() && offset % pmtu == 0 && offset <= total);
        Segments {
            transport,
            kind,
            total,
            pmtu,
            offset,
            done: false,
        }
    }

    fn opcode(&self, place: Place) -> Opcode {
        use MessageKind::*;
        use Place::*;
        let rc = match (self.kind, place) {
            (Send { .. }, First) => Opcode::RC_SEND_FIRST,
            (Send { .. }, Middle) => Opcode::RC_SEND_MIDDLE,
            (Send { imm: true, .. }, Last) => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
            (Send { inv: true, .. }, Last) => Opcode::RC_SEND_LAST_WITH_INVALIDATE,
            (Send { .. }, Last) => Opcode::RC_SEND_LAST,
            (Send { imm: true, .. }, Only) => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
            (Send { inv: true, .. }, Only) => Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
            (Send { .. }, Only) => Opcode::RC_SEND_ONLY,
            (Write { .. }, First) => Opcode::RC_RDMA_WRITE_FIRST,
            (Write { .. }, Middle) => Opcode::RC_RDMA_WRITE_MIDDLE,
            (Write { imm: true }, Last) => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            (Write { imm: false }, Last) => Opcode::RC_RDMA_WRITE_LAST,
            (Write { imm: true }, Only) => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            (Write { imm: false }, Only) => Opcode::RC_RDMA_WRITE_ONLY,
            (ReadResponse, First) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            (ReadResponse, Middle) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            (ReadResponse, Last) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
            (ReadResponse, Only) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        };
        match self.transport {
            // UC opcodes are the RC ones with the transport bits 001 (IBTA table 38).
            Transport::Uc => Opcode(rc.0 | 0x20),
            // UD has only SEND ONLY (with immediate): the RC ones with the bits 011; a UD
            // message is never longer than one PMTU.
            Transport::Ud => Opcode(rc.0 | 0x60),
            // XRC opcodes are the RC ones with the transport bits 101 (annex A14.6).
            Transport::Xrc => Opcode(rc.0 | 0xa0),
            _ => rc,
        }
    }
}

impl Iterator for Segments {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.done {
            return None;
        }
        let remaining = self.total - self.offset;
        let single = self.total <= self.pmtu;
        let (place, len) = if single {
            (Place::Only, remaining)
        } else if self.offset == 0 {
            (Place::First, self.pmtu)
        } else if remaining > self.pmtu {
            (Place::Middle, self.pmtu)
        } else {
            (Place::Last, remaining)
        };
        let last = matches!(place, Place::Last | Place::Only);
        let seg = Segment {
            opcode: self.opcode(place),
            offset: self.offset,
            len,
            last,
        };
        self.offset += len;
        self.done = last;
        Some(seg)
    }
}

/// How many PSNs a message of `total` bytes uses at path MTU `pmtu`: one per packet, at least
/// one (a zero-length message is one packet). For an RDMA READ request this is the number of
/// response packets (IBTA 9.7.2.2: "the requester increments its PSN by the number of
/// response packets").
pub fn packets_for(total: u32, pmtu: u32) -> u32 {
    total.div_ceil(pmtu).max(1)
}

/// Whether a payload of `len` bytes is right for a packet at `position` of a SEND or RDMA
/// WRITE message (the responder's side of segmentation, as rxe's `check_length`): a first or
/// middle packet carries exactly one PMTU, a last one 1 to PMTU bytes (a message that ends
/// on a PMTU boundary has no empty last packet), an only packet at most one PMTU.
pub fn payload_fits(position: Position, len: usize, pmtu: u32) -> bool {
    let pmtu = pmtu as usize;
    match position {
        Position::First | Position::Middle => len == pmtu,
        Position::Last => (1..=pmtu).contains(&len),
        Position::Only => len <= pmtu,
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;
    use softrnic_wire::opcode::PATH_MTUS;

    #[test]
    fn payload_lengths_by_position() {
        for (pos, len, ok) in [
            (Position::First, 256, true),
            (Position::First, 255, false),
            (Position::Middle, 257, false),
            (Position::Last, 0, false),
            (Position::Last, 1, true),
            (Position::Last, 256, true),
            (Position::Last, 257, false),
            (Position::Only, 0, true),
            (Position::Only, 256, true),
            (Position::Only, 257, false),
        ] {
            assert_eq!(payload_fits(pos, len, 256), ok, "{pos:?} {len}");
        }
    }

    proptest! {
        /// Every packet the requester's segmentation makes passes the responder's check.
        #[test]
        fn segments_fit_their_positions(total in 0u32..20_000, k in 0usize..5, write in any::<bool>()) {
            let pmtu = PATH_MTUS[k] as u32;
            let kind = if write {
                MessageKind::Write { imm: false }
            } else {
                MessageKind::Send { imm: false, inv: false }
            };
            for s in collect(kind, total, pmtu) {
                let pos = s.opcode.info().unwrap().position;
                prop_assert!(payload_fits(pos, s.len as usize, pmtu), "{:?}", s);
            }
        }
    }

    fn collect(kind: MessageKind, total: u32, pmtu: u32) -> Vec<Segment> {
        Segments::new(Transport::Rc, kind, total, pmtu, 0).collect()
    }

    #[test]
    fn zero_length_is_one_only_packet() {
        let s = collect(MessageKind::Write { imm: true }, 0, 1024);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].opcode, Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE);
        assert_eq!((s[0].len, s[0].last), (0, true));
    }

    #[test]
    fn a_4096_byte_send_at_mtu_1024_is_first_middle_middle_last() {
        // As in the shared rc_pingpong capture of kernel rxe.
        let s = collect(
            MessageKind::Send {
                imm: false,
                inv: false,
            },
            4096,
            1024,
        );
        let ops: Vec<Opcode> = s.iter().map(|s| s.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::RC_SEND_FIRST,
                Opcode::RC_SEND_MIDDLE,
                Opcode::RC_SEND_MIDDLE,
                Opcode::RC_SEND_LAST
            ]
        );
        assert!(s.iter().all(|s| s.len == 1024));
        assert_eq!(packets_for(4096, 1024), 4);
    }

    #[test]
    fn uc_uses_the_uc_opcodes() {
        let s: Vec<Segment> = Segments::new(
            Transport::Uc,
            MessageKind::Send {
                imm: true,
                inv: false,
            },
            10,
            256,
            0,
        )
        .collect();
        assert_eq!(s[0].opcode, Opcode::UC_SEND_ONLY_WITH_IMMEDIATE);
    }

    #[test]
    fn resuming_mid_message_starts_with_a_middle_or_last() {
        let s: Vec<Segment> =
            Segments::new(Transport::Rc, MessageKind::ReadResponse, 3000, 1024, 1024).collect();
        let ops: Vec<Opcode> = s.iter().map(|s| s.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
                Opcode::RC_RDMA_READ_RESPONSE_LAST
            ]
        );
        assert_eq!((s[1].offset, s[1].len), (2048, 952));
    }

    fn kind() -> impl Strategy<Value = MessageKind> {
        prop_oneof![
            (any::<bool>(), any::<bool>()).prop_map(|(imm, inv)| MessageKind::Send {
                imm,
                inv: inv && !imm
            }),
            any::<bool>().prop_map(|imm| MessageKind::Write { imm }),
            Just(MessageKind::ReadResponse),
        ]
    }

    proptest! {
        /// The packets tile the message exactly, obey the wire layer's opcode table (first and
        /// middle carry exactly one PMTU) and their count is `packets_for`.
        #[test]
        fn packets_tile_the_message(kind in kind(), total in 0u32..40_000, mtu in prop::sample::select(PATH_MTUS.to_vec())) {
            let pmtu = mtu as u32;
            let segs = collect(kind, total, pmtu);
            prop_assert_eq!(segs.len() as u32, packets_for(total, pmtu));
            let mut next = 0;
            for (i, s) in segs.iter().enumerate() {
                prop_assert_eq!(s.offset, next);
                next += s.len;
                let info = s.opcode.info().unwrap();
                prop_assert_eq!(s.last, i == segs.len() - 1);
                let expect = match (segs.len(), i) {
                    (1, _) => Position::Only,
                    (_, 0) => Position::First,
                    (n, i) if i == n - 1 => Position::Last,
                    _ => Position::Middle,
                };
                prop_assert_eq!(info.position, expect);
                if matches!(expect, Position::First | Position::Middle) {
                    prop_assert_eq!(s.len, pmtu);
                }
            }
            prop_assert_eq!(next, total);
        }
    }
}

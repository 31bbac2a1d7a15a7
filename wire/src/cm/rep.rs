//! ConnectReply, REP (IBTA 12.6.8, table "REP message contents"): the passive side accepts a
//! REQ and gives its own QP, starting PSN and resources.
//!
//! ```text
//!  byte 0-3    | Local Communication ID                                  |
//!  byte 4-7    | Remote Communication ID                                 |
//!  byte 8-11   | Local Q_Key                                             |
//!  byte 12-15  | Local QPN (24)               | reserved (8)             |
//!  byte 16-19  | Local EE Context Number (24) | reserved (8)             |
//!  byte 20-23  | Starting PSN (24)            | reserved (8)             |
//!  byte 24     | Responder Resources                                     |
//!  byte 25     | Initiator Depth                                         |
//!  byte 26     | Target ACK Delay (5) | Failover Accepted (2) | E2E Flow Control |
//!  byte 27     | RNR Retry Count (3) | SRQ | reserved (4)                |
//!  byte 28-35  | Local CA GUID                                           |
//!  byte 36-231 | Private Data (196)                                      |
//! ```

use super::layout::{self, message, Bits};
use super::MSG_LEN;
use crate::Psn;

/// Bytes of private data in a REP.
pub const PRIVATE_DATA_LEN: usize = 196;

/// Failover Accepted: the alternate path is accepted.
pub const FAILOVER_ACCEPTED: u8 = 0;
/// Failover Accepted: failover is not supported.
pub const FAILOVER_NOT_SUPPORTED: u8 = 1;
/// Failover Accepted: the alternate path is rejected.
pub const FAILOVER_REJECTED: u8 = 2;

message! {
    "CM REP", MSG_LEN;
    /// A parsed REP: every field of the message.
    pub struct RepRepr {
        /// Local Communication ID: the passive side's handle.
        value local_comm_id / set_local_comm_id: u32 = 0..4,
        /// Remote Communication ID: the Local Communication ID of the REQ.
        value remote_comm_id / set_remote_comm_id: u32 = 4..8,
        /// Local Q_Key (RD only).
        value local_q_key / set_local_q_key: u32 = 8..12,
        /// Local QPN: the passive side's QP (24 bits).
        value local_qpn / set_local_qpn: u32 = 12..15,
        /// Local EE Context Number (RD only; 24 bits).
        value local_ee_context_number / set_local_ee_context_number: u32 = 16..19,
        /// Starting PSN: the first PSN the passive side will send.
        value starting_psn / set_starting_psn: Psn = 20..23,
        /// Responder Resources.
        value responder_resources / set_responder_resources: u8 = 24,
        /// Initiator Depth.
        value initiator_depth / set_initiator_depth: u8 = 25,
        /// Target ACK Delay (5 bits).
        value target_ack_delay / set_target_ack_delay: u8 = Bits::new(26, 3, 5),
        /// Failover Accepted (2 bits, `FAILOVER_*`).
        value failover_accepted / set_failover_accepted: u8 = Bits::new(26, 1, 2),
        /// End-to-End Flow Control.
        value end_to_end_flow_control / set_end_to_end_flow_control: bool = Bits::new(26, 0, 1),
        /// RNR Retry Count (3 bits).
        value rnr_retry_count / set_rnr_retry_count: u8 = Bits::new(27, 5, 3),
        /// SRQ.
        value srq / set_srq: bool = Bits::new(27, 4, 1),
        /// Local CA GUID.
        value local_ca_guid / set_local_ca_guid: u64 = 28..36,
        /// Private Data (196 bytes).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 36..232,
    }
    display(r) "local_comm_id={:#010x} remote_comm_id={:#010x} qpn={:#x} psn={}",
        r.local_comm_id, r.remote_comm_id, r.local_qpn, r.starting_psn;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit: the byte after each 24-bit number, and the low 4 bits of
    /// byte 27.
    pub fn clear_reserved(&mut self) {
        layout::clear(
            self.b_mut(),
            &[15..16, 19..20, 23..24],
            &[Bits::new(27, 0, 4)],
        );
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::zero_padded;

    // The REP of frame 2 of tests/data/rping_rdmacm.pcap (MAD data; the private data is all
    // zero).
    static PACKET_BYTES: [u8; MSG_LEN] = zero_padded(&[
        0xb9, 0xa6, 0xe9, 0x21, 0x35, 0x70, 0xa4, 0x9b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1e,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x94, 0xcb, 0xfa, 0x00, 0x01, 0x01, 0x78, 0xe0, 0x50, 0x54,
        0x00, 0xff, 0xfe, 0x99, 0x00, 0x02,
    ]);

    fn repr() -> RepRepr {
        RepRepr {
            local_comm_id: 0xb9a6_e921,
            remote_comm_id: 0x3570_a49b,
            local_q_key: 0,
            local_qpn: 0x1e,
            local_ee_context_number: 0,
            starting_psn: Psn::new(0x94_cbfa),
            responder_resources: 1,
            initiator_depth: 1,
            target_ack_delay: 0x0f,
            failover_accepted: FAILOVER_ACCEPTED,
            end_to_end_flow_control: false,
            rnr_retry_count: 7,
            srq: false,
            local_ca_guid: 0x5054_00ff_fe99_0002,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    crate::cm::layout::message_tests!(RepRepr, "CM REP", 232, frame 2);

    /// The values tshark shows for frame 2 ("CM ConnectReply").
    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.local_comm_id(), 0xb9a6e921);
        assert_eq!(p.remote_comm_id(), 0x3570a49b);
        assert_eq!(p.local_q_key(), 0);
        assert_eq!(p.local_qpn(), 0x00001e);
        assert_eq!(p.local_ee_context_number(), 0);
        assert_eq!(p.starting_psn(), Psn::new(0x94cbfa));
        assert_eq!(p.responder_resources(), 1);
        assert_eq!(p.initiator_depth(), 1);
        assert_eq!(p.target_ack_delay(), 0x0f);
        assert_eq!(p.failover_accepted(), 0);
        assert!(!p.end_to_end_flow_control());
        assert_eq!(p.rnr_retry_count(), 7);
        assert!(!p.srq());
        assert_eq!(p.local_ca_guid(), 0x505400fffe990002);
        assert_eq!(p.private_data(), &[0u8; PRIVATE_DATA_LEN][..]);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        p.set_local_comm_id(0xb9a6e921);
        p.set_remote_comm_id(0x3570a49b);
        p.set_local_q_key(0);
        p.set_local_qpn(0x1e);
        p.set_local_ee_context_number(0);
        p.set_starting_psn(Psn::new(0x94cbfa));
        p.set_responder_resources(1);
        p.set_initiator_depth(1);
        p.set_target_ack_delay(0x0f);
        p.set_failover_accepted(FAILOVER_ACCEPTED);
        p.set_end_to_end_flow_control(false);
        p.set_rnr_retry_count(7);
        p.set_srq(false);
        p.set_local_ca_guid(0x505400fffe990002);
        p.private_data_mut().fill(0);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_reserved_bits() {
        let mut bytes = [0xffu8; MSG_LEN];
        Packet::new_unchecked(&mut bytes[..]).clear_reserved();
        assert_eq!(
            [bytes[15], bytes[19], bytes[23], bytes[26], bytes[27]],
            [0, 0, 0, 0xff, 0xf0]
        );
    }
}

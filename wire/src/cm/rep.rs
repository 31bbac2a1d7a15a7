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

use core::fmt;

use super::{get_array, get_u32, get_u64, MSG_LEN};
use crate::{fixed_view, read_u24, write_u24, Psn, Result};

/// Bytes of private data in a REP.
pub const PRIVATE_DATA_LEN: usize = 196;

/// Failover Accepted: the alternate path is accepted.
pub const FAILOVER_ACCEPTED: u8 = 0;
/// Failover Accepted: failover is not supported.
pub const FAILOVER_NOT_SUPPORTED: u8 = 1;
/// Failover Accepted: the alternate path is rejected.
pub const FAILOVER_REJECTED: u8 = 2;

mod field {
    use crate::cm::{Bits, Field};

    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const LOCAL_Q_KEY: Field = 8..12;
    pub const LOCAL_QPN: Field = 12..15;
    pub const LOCAL_EE_CONTEXT_NUMBER: Field = 16..19;
    pub const STARTING_PSN: Field = 20..23;
    pub const RESPONDER_RESOURCES: usize = 24;
    pub const INITIATOR_DEPTH: usize = 25;
    pub const TARGET_ACK_DELAY: Bits = Bits::new(26, 3, 5);
    pub const FAILOVER_ACCEPTED: Bits = Bits::new(26, 1, 2);
    pub const END_TO_END_FLOW_CONTROL: Bits = Bits::new(26, 0, 1);
    pub const RNR_RETRY_COUNT: Bits = Bits::new(27, 5, 3);
    pub const SRQ: Bits = Bits::new(27, 4, 1);
    pub const LOCAL_CA_GUID: Field = 28..36;
    pub const PRIVATE_DATA: Field = 36..232;

    pub const RESERVED_BYTES: [Field; 3] = [15..16, 19..20, 23..24];
    pub const RESERVED_BITS: [Bits; 1] = [Bits::new(27, 0, 4)];
}

fixed_view!("CM REP", MSG_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The Local Communication ID field.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The Remote Communication ID field.
    pub fn remote_comm_id(&self) -> u32 {
        get_u32(self.b(), field::REMOTE_COMM_ID)
    }
    /// The Local Q_Key field.
    pub fn local_q_key(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_Q_KEY)
    }
    /// The Local QPN field (24 bits).
    pub fn local_qpn(&self) -> u32 {
        read_u24(&self.b()[field::LOCAL_QPN])
    }
    /// The Local EE Context Number field (24 bits).
    pub fn local_ee_context_number(&self) -> u32 {
        read_u24(&self.b()[field::LOCAL_EE_CONTEXT_NUMBER])
    }
    /// The Starting PSN field.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(read_u24(&self.b()[field::STARTING_PSN]))
    }
    /// The Responder Resources field.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// The Initiator Depth field.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// The Target ACK Delay field (5 bits).
    pub fn target_ack_delay(&self) -> u8 {
        field::TARGET_ACK_DELAY.get(self.b())
    }
    /// The Failover Accepted field (2 bits, `FAILOVER_*`).
    pub fn failover_accepted(&self) -> u8 {
        field::FAILOVER_ACCEPTED.get(self.b())
    }
    /// The End-to-End Flow Control bit.
    pub fn end_to_end_flow_control(&self) -> bool {
        field::END_TO_END_FLOW_CONTROL.get_bool(self.b())
    }
    /// The RNR Retry Count field (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        field::RNR_RETRY_COUNT.get(self.b())
    }
    /// The SRQ bit.
    pub fn srq(&self) -> bool {
        field::SRQ.get_bool(self.b())
    }
    /// The Local CA GUID field.
    pub fn local_ca_guid(&self) -> u64 {
        get_u64(self.b(), field::LOCAL_CA_GUID)
    }
    /// The Private Data field (196 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Zeroes every reserved bit.
    pub fn clear_reserved(&mut self) {
        super::clear(self.b_mut(), &field::RESERVED_BYTES, &field::RESERVED_BITS);
    }
    /// Sets the Local Communication ID field.
    pub fn set_local_comm_id(&mut self, v: u32) {
        self.b_mut()[field::LOCAL_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Remote Communication ID field.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        self.b_mut()[field::REMOTE_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Local Q_Key field.
    pub fn set_local_q_key(&mut self, v: u32) {
        self.b_mut()[field::LOCAL_Q_KEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Local QPN field (low 24 bits of `v`).
    pub fn set_local_qpn(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::LOCAL_QPN], v);
    }
    /// Sets the Local EE Context Number field (low 24 bits of `v`).
    pub fn set_local_ee_context_number(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::LOCAL_EE_CONTEXT_NUMBER], v);
    }
    /// Sets the Starting PSN field.
    pub fn set_starting_psn(&mut self, v: Psn) {
        write_u24(&mut self.b_mut()[field::STARTING_PSN], v.value());
    }
    /// Sets the Responder Resources field.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.b_mut()[field::RESPONDER_RESOURCES] = v;
    }
    /// Sets the Initiator Depth field.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.b_mut()[field::INITIATOR_DEPTH] = v;
    }
    /// Sets the Target ACK Delay field (low 5 bits of `v`).
    pub fn set_target_ack_delay(&mut self, v: u8) {
        field::TARGET_ACK_DELAY.set(self.b_mut(), v);
    }
    /// Sets the Failover Accepted field (low 2 bits of `v`).
    pub fn set_failover_accepted(&mut self, v: u8) {
        field::FAILOVER_ACCEPTED.set(self.b_mut(), v);
    }
    /// Sets the End-to-End Flow Control bit.
    pub fn set_end_to_end_flow_control(&mut self, v: bool) {
        field::END_TO_END_FLOW_CONTROL.set_bool(self.b_mut(), v);
    }
    /// Sets the RNR Retry Count field (low 3 bits of `v`).
    pub fn set_rnr_retry_count(&mut self, v: u8) {
        field::RNR_RETRY_COUNT.set(self.b_mut(), v);
    }
    /// Sets the SRQ bit.
    pub fn set_srq(&mut self, v: bool) {
        field::SRQ.set_bool(self.b_mut(), v);
    }
    /// Sets the Local CA GUID field.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        self.b_mut()[field::LOCAL_CA_GUID].copy_from_slice(&v.to_be_bytes());
    }
    /// The Private Data field, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::PRIVATE_DATA]
    }
}

/// A parsed REP: every field of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepRepr {
    /// Local Communication ID: the passive side's handle.
    pub local_comm_id: u32,
    /// Remote Communication ID: the Local Communication ID of the REQ.
    pub remote_comm_id: u32,
    /// Local Q_Key (RD only).
    pub local_q_key: u32,
    /// Local QPN: the passive side's QP (24 bits).
    pub local_qpn: u32,
    /// Local EE Context Number (RD only; 24 bits).
    pub local_ee_context_number: u32,
    /// Starting PSN: the first PSN the passive side will send.
    pub starting_psn: Psn,
    /// Responder Resources.
    pub responder_resources: u8,
    /// Initiator Depth.
    pub initiator_depth: u8,
    /// Target ACK Delay (5 bits).
    pub target_ack_delay: u8,
    /// Failover Accepted (2 bits, `FAILOVER_*`).
    pub failover_accepted: u8,
    /// End-to-End Flow Control.
    pub end_to_end_flow_control: bool,
    /// RNR Retry Count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl RepRepr {
    /// Parses a REP from the 232 bytes of MAD data.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<RepRepr> {
        packet.check_len()?;
        Ok(RepRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            local_q_key: packet.local_q_key(),
            local_qpn: packet.local_qpn(),
            local_ee_context_number: packet.local_ee_context_number(),
            starting_psn: packet.starting_psn(),
            responder_resources: packet.responder_resources(),
            initiator_depth: packet.initiator_depth(),
            target_ack_delay: packet.target_ack_delay(),
            failover_accepted: packet.failover_accepted(),
            end_to_end_flow_control: packet.end_to_end_flow_control(),
            rnr_retry_count: packet.rnr_retry_count(),
            srq: packet.srq(),
            local_ca_guid: packet.local_ca_guid(),
            private_data: get_array(packet.b(), field::PRIVATE_DATA),
        })
    }

    /// The message length (always 232).
    pub const fn buffer_len(&self) -> usize {
        MSG_LEN
    }

    /// Writes all 232 bytes, reserved bits as zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.clear_reserved();
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_local_q_key(self.local_q_key);
        packet.set_local_qpn(self.local_qpn);
        packet.set_local_ee_context_number(self.local_ee_context_number);
        packet.set_starting_psn(self.starting_psn);
        packet.set_responder_resources(self.responder_resources);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_target_ack_delay(self.target_ack_delay);
        packet.set_failover_accepted(self.failover_accepted);
        packet.set_end_to_end_flow_control(self.end_to_end_flow_control);
        packet.set_rnr_retry_count(self.rnr_retry_count);
        packet.set_srq(self.srq);
        packet.set_local_ca_guid(self.local_ca_guid);
        packet
            .private_data_mut()
            .copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for RepRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CM REP local_comm_id={:#010x} remote_comm_id={:#010x} qpn={:#x} psn={}",
            self.local_comm_id, self.remote_comm_id, self.local_qpn, self.starting_psn
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::{capture_data, zero_padded};
    use crate::Error;

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

    #[test]
    fn test_capture_bytes() {
        assert_eq!(PACKET_BYTES, capture_data(2));
    }

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
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(RepRepr::parse(&p).unwrap(), repr());
    }

    #[test]
    fn test_emit() {
        let mut bytes = [0xa5u8; MSG_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&PACKET_BYTES[..231]).unwrap_err(),
            Error::Truncated {
                what: "CM REP",
                need: 232,
                have: 231
            }
        );
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

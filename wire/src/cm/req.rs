//! ConnectRequest, REQ (IBTA 12.6.5, table "REQ message contents"): the active side's offer of
//! a connection — its QP, starting PSN, resources, and the path(s) to use.
//!
//! ```text
//!  byte 0-3    | Local Communication ID                                            |
//!  byte 4-7    | reserved                                                          |
//!  byte 8-15   | ServiceID                                                         |
//!  byte 16-23  | Local CA GUID                                                     |
//!  byte 24-27  | reserved                                                          |
//!  byte 28-31  | Local Q_Key                                                       |
//!  byte 32-35  | Local QPN (24)          | Responder Resources (8)                 |
//!  byte 36-39  | Local EECN (24)         | Initiator Depth (8)                     |
//!  byte 40-43  | Remote EECN (24)        | Remote CM Response Timeout (5) |
//!              |                         |   Transport Service Type (2) | E2E Flow Control |
//!  byte 44-47  | Starting PSN (24)       | Local CM Response Timeout (5) | Retry Count (3) |
//!  byte 48-51  | Partition Key (16) | Path MTU (4) | RDC Exists | RNR Retry Count (3) |
//!              |   Max CM Retries (4) | SRQ | Extended Transport Type (3)            |
//!  byte 52-95  | primary path   (see [`crate::cm::path`])                          |
//!  byte 96-139 | alternate path (byte 139 bit 2: SAP Supported)                    |
//!  byte 140-231| Private Data (92)                                                 |
//! ```

use core::fmt;

use super::path::{self, PathRepr};
use super::{get_array, get_u16, get_u32, get_u64, MSG_LEN};
use crate::{fixed_view, read_u24, write_u24, Psn, Result};

/// Bytes of private data in a REQ.
pub const PRIVATE_DATA_LEN: usize = 92;

mod field {
    use crate::cm::{Bits, Field};

    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const SERVICE_ID: Field = 8..16;
    pub const LOCAL_CA_GUID: Field = 16..24;
    pub const LOCAL_Q_KEY: Field = 28..32;
    pub const LOCAL_QPN: Field = 32..35;
    pub const RESPONDER_RESOURCES: usize = 35;
    pub const LOCAL_EECN: Field = 36..39;
    pub const INITIATOR_DEPTH: usize = 39;
    pub const REMOTE_EECN: Field = 40..43;
    pub const REMOTE_CM_RESPONSE_TIMEOUT: Bits = Bits::new(43, 3, 5);
    pub const TRANSPORT_SERVICE_TYPE: Bits = Bits::new(43, 1, 2);
    pub const END_TO_END_FLOW_CONTROL: Bits = Bits::new(43, 0, 1);
    pub const STARTING_PSN: Field = 44..47;
    pub const LOCAL_CM_RESPONSE_TIMEOUT: Bits = Bits::new(47, 3, 5);
    pub const RETRY_COUNT: Bits = Bits::new(47, 0, 3);
    pub const PARTITION_KEY: Field = 48..50;
    pub const PATH_MTU: Bits = Bits::new(50, 4, 4);
    pub const RDC_EXISTS: Bits = Bits::new(50, 3, 1);
    pub const RNR_RETRY_COUNT: Bits = Bits::new(50, 0, 3);
    pub const MAX_CM_RETRIES: Bits = Bits::new(51, 4, 4);
    pub const SRQ: Bits = Bits::new(51, 3, 1);
    pub const EXTENDED_TRANSPORT_TYPE: Bits = Bits::new(51, 0, 3);
    pub const PRIMARY_PATH: Field = 52..96;
    pub const ALTERNATE_PATH: Field = 96..140;
    /// In the reserved bits of the alternate path's Local ACK Timeout byte.
    pub const SAP_SUPPORTED: Bits = Bits::new(139, 2, 1);
    pub const PRIVATE_DATA: Field = 140..232;

    pub const RESERVED_BYTES: [Field; 2] = [4..8, 24..28];
}

fixed_view!("CM REQ", MSG_LEN);

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The Local Communication ID field.
    pub fn local_comm_id(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_COMM_ID)
    }
    /// The ServiceID field.
    pub fn service_id(&self) -> u64 {
        get_u64(self.b(), field::SERVICE_ID)
    }
    /// The Local CA GUID field.
    pub fn local_ca_guid(&self) -> u64 {
        get_u64(self.b(), field::LOCAL_CA_GUID)
    }
    /// The Local Q_Key field.
    pub fn local_q_key(&self) -> u32 {
        get_u32(self.b(), field::LOCAL_Q_KEY)
    }
    /// The Local QPN field (24 bits).
    pub fn local_qpn(&self) -> u32 {
        read_u24(&self.b()[field::LOCAL_QPN])
    }
    /// The Responder Resources field.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// The Local EECN field (24 bits).
    pub fn local_eecn(&self) -> u32 {
        read_u24(&self.b()[field::LOCAL_EECN])
    }
    /// The Initiator Depth field.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// The Remote EECN field (24 bits).
    pub fn remote_eecn(&self) -> u32 {
        read_u24(&self.b()[field::REMOTE_EECN])
    }
    /// The Remote CM Response Timeout field (5 bits).
    pub fn remote_cm_response_timeout(&self) -> u8 {
        field::REMOTE_CM_RESPONSE_TIMEOUT.get(self.b())
    }
    /// The Transport Service Type field (2 bits, `TRANSPORT_*`).
    pub fn transport_service_type(&self) -> u8 {
        field::TRANSPORT_SERVICE_TYPE.get(self.b())
    }
    /// The End-to-End Flow Control bit.
    pub fn end_to_end_flow_control(&self) -> bool {
        field::END_TO_END_FLOW_CONTROL.get_bool(self.b())
    }
    /// The Starting PSN field.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(read_u24(&self.b()[field::STARTING_PSN]))
    }
    /// The Local CM Response Timeout field (5 bits).
    pub fn local_cm_response_timeout(&self) -> u8 {
        field::LOCAL_CM_RESPONSE_TIMEOUT.get(self.b())
    }
    /// The Retry Count field (3 bits).
    pub fn retry_count(&self) -> u8 {
        field::RETRY_COUNT.get(self.b())
    }
    /// The Partition Key field.
    pub fn partition_key(&self) -> u16 {
        get_u16(self.b(), field::PARTITION_KEY)
    }
    /// The Path Packet Payload MTU field (4 bits, IBTA encoding: 3 = 1024 bytes).
    pub fn path_mtu(&self) -> u8 {
        field::PATH_MTU.get(self.b())
    }
    /// The RDC Exists bit.
    pub fn rdc_exists(&self) -> bool {
        field::RDC_EXISTS.get_bool(self.b())
    }
    /// The RNR Retry Count field (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        field::RNR_RETRY_COUNT.get(self.b())
    }
    /// The Max CM Retries field (4 bits).
    pub fn max_cm_retries(&self) -> u8 {
        field::MAX_CM_RETRIES.get(self.b())
    }
    /// The SRQ bit.
    pub fn srq(&self) -> bool {
        field::SRQ.get_bool(self.b())
    }
    /// The Extended Transport Type field (3 bits).
    pub fn extended_transport_type(&self) -> u8 {
        field::EXTENDED_TRANSPORT_TYPE.get(self.b())
    }
    /// A view of the primary path information.
    pub fn primary_path(&self) -> path::Packet<&[u8]> {
        path::Packet::new_unchecked(&self.b()[field::PRIMARY_PATH])
    }
    /// A view of the alternate path information.
    pub fn alternate_path(&self) -> path::Packet<&[u8]> {
        path::Packet::new_unchecked(&self.b()[field::ALTERNATE_PATH])
    }
    /// The SAP Supported bit (bit 2 of byte 139; Linux `CM_REQ_SAP_SUPPORTED`).
    pub fn sap_supported(&self) -> bool {
        field::SAP_SUPPORTED.get_bool(self.b())
    }
    /// The Private Data field (92 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn b_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Zeroes every reserved bit, those of both paths included (but not SAP Supported).
    pub fn clear_reserved(&mut self) {
        super::clear(self.b_mut(), &field::RESERVED_BYTES, &[]);
        self.primary_path_mut().clear_reserved();
        let sap = self.sap_supported();
        self.alternate_path_mut().clear_reserved();
        self.set_sap_supported(sap);
    }
    /// Sets the Local Communication ID field.
    pub fn set_local_comm_id(&mut self, v: u32) {
        self.b_mut()[field::LOCAL_COMM_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the ServiceID field.
    pub fn set_service_id(&mut self, v: u64) {
        self.b_mut()[field::SERVICE_ID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Local CA GUID field.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        self.b_mut()[field::LOCAL_CA_GUID].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Local Q_Key field.
    pub fn set_local_q_key(&mut self, v: u32) {
        self.b_mut()[field::LOCAL_Q_KEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Local QPN field (low 24 bits of `v`).
    pub fn set_local_qpn(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::LOCAL_QPN], v);
    }
    /// Sets the Responder Resources field.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.b_mut()[field::RESPONDER_RESOURCES] = v;
    }
    /// Sets the Local EECN field (low 24 bits of `v`).
    pub fn set_local_eecn(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::LOCAL_EECN], v);
    }
    /// Sets the Initiator Depth field.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.b_mut()[field::INITIATOR_DEPTH] = v;
    }
    /// Sets the Remote EECN field (low 24 bits of `v`).
    pub fn set_remote_eecn(&mut self, v: u32) {
        write_u24(&mut self.b_mut()[field::REMOTE_EECN], v);
    }
    /// Sets the Remote CM Response Timeout field (low 5 bits of `v`).
    pub fn set_remote_cm_response_timeout(&mut self, v: u8) {
        field::REMOTE_CM_RESPONSE_TIMEOUT.set(self.b_mut(), v);
    }
    /// Sets the Transport Service Type field (low 2 bits of `v`).
    pub fn set_transport_service_type(&mut self, v: u8) {
        field::TRANSPORT_SERVICE_TYPE.set(self.b_mut(), v);
    }
    /// Sets the End-to-End Flow Control bit.
    pub fn set_end_to_end_flow_control(&mut self, v: bool) {
        field::END_TO_END_FLOW_CONTROL.set_bool(self.b_mut(), v);
    }
    /// Sets the Starting PSN field.
    pub fn set_starting_psn(&mut self, v: Psn) {
        write_u24(&mut self.b_mut()[field::STARTING_PSN], v.value());
    }
    /// Sets the Local CM Response Timeout field (low 5 bits of `v`).
    pub fn set_local_cm_response_timeout(&mut self, v: u8) {
        field::LOCAL_CM_RESPONSE_TIMEOUT.set(self.b_mut(), v);
    }
    /// Sets the Retry Count field (low 3 bits of `v`).
    pub fn set_retry_count(&mut self, v: u8) {
        field::RETRY_COUNT.set(self.b_mut(), v);
    }
    /// Sets the Partition Key field.
    pub fn set_partition_key(&mut self, v: u16) {
        self.b_mut()[field::PARTITION_KEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the Path Packet Payload MTU field (low 4 bits of `v`).
    pub fn set_path_mtu(&mut self, v: u8) {
        field::PATH_MTU.set(self.b_mut(), v);
    }
    /// Sets the RDC Exists bit.
    pub fn set_rdc_exists(&mut self, v: bool) {
        field::RDC_EXISTS.set_bool(self.b_mut(), v);
    }
    /// Sets the RNR Retry Count field (low 3 bits of `v`).
    pub fn set_rnr_retry_count(&mut self, v: u8) {
        field::RNR_RETRY_COUNT.set(self.b_mut(), v);
    }
    /// Sets the Max CM Retries field (low 4 bits of `v`).
    pub fn set_max_cm_retries(&mut self, v: u8) {
        field::MAX_CM_RETRIES.set(self.b_mut(), v);
    }
    /// Sets the SRQ bit.
    pub fn set_srq(&mut self, v: bool) {
        field::SRQ.set_bool(self.b_mut(), v);
    }
    /// Sets the Extended Transport Type field (low 3 bits of `v`).
    pub fn set_extended_transport_type(&mut self, v: u8) {
        field::EXTENDED_TRANSPORT_TYPE.set(self.b_mut(), v);
    }
    /// A writable view of the primary path information.
    pub fn primary_path_mut(&mut self) -> path::Packet<&mut [u8]> {
        path::Packet::new_unchecked(&mut self.b_mut()[field::PRIMARY_PATH])
    }
    /// A writable view of the alternate path information.
    pub fn alternate_path_mut(&mut self) -> path::Packet<&mut [u8]> {
        path::Packet::new_unchecked(&mut self.b_mut()[field::ALTERNATE_PATH])
    }
    /// Sets the SAP Supported bit.
    pub fn set_sap_supported(&mut self, v: bool) {
        field::SAP_SUPPORTED.set_bool(self.b_mut(), v);
    }
    /// The Private Data field, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.b_mut()[field::PRIVATE_DATA]
    }
}

/// A parsed REQ: every field of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqRepr {
    /// Local Communication ID: the sender's handle for this connection.
    pub local_comm_id: u32,
    /// ServiceID the passive side listens on (rdma_cm: 0x0000000001 | port space | port).
    pub service_id: u64,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Local Q_Key (used for RD only).
    pub local_q_key: u32,
    /// Local QPN: the sender's QP (24 bits).
    pub local_qpn: u32,
    /// Responder Resources: RDMA Read / atomic requests the sender accepts at once.
    pub responder_resources: u8,
    /// Local EECN (RD only; 24 bits).
    pub local_eecn: u32,
    /// Initiator Depth: RDMA Read / atomic requests the sender issues at once.
    pub initiator_depth: u8,
    /// Remote EECN (RD only; 24 bits).
    pub remote_eecn: u32,
    /// Remote CM Response Timeout (5 bits; 4.096 µs · 2^value).
    pub remote_cm_response_timeout: u8,
    /// Transport Service Type (2 bits, `TRANSPORT_*`).
    pub transport_service_type: u8,
    /// End-to-End Flow Control.
    pub end_to_end_flow_control: bool,
    /// Starting PSN: the first PSN the sender will send.
    pub starting_psn: Psn,
    /// Local CM Response Timeout (5 bits).
    pub local_cm_response_timeout: u8,
    /// Retry Count (3 bits).
    pub retry_count: u8,
    /// Partition Key.
    pub partition_key: u16,
    /// Path Packet Payload MTU (4 bits, IBTA encoding).
    pub path_mtu: u8,
    /// RDC Exists.
    pub rdc_exists: bool,
    /// RNR Retry Count (3 bits; 7 = infinite).
    pub rnr_retry_count: u8,
    /// Max CM Retries (4 bits).
    pub max_cm_retries: u8,
    /// SRQ: the sender's QP uses a shared receive queue.
    pub srq: bool,
    /// Extended Transport Type (3 bits; 0 unless XRC).
    pub extended_transport_type: u8,
    /// Primary path.
    pub primary_path: PathRepr,
    /// Alternate path (all zeros: none).
    pub alternate_path: PathRepr,
    /// SAP Supported (bit 2 of byte 139).
    pub sap_supported: bool,
    /// Private Data (rdma_cm puts its IP header here).
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl ReqRepr {
    /// Parses a REQ from the 232 bytes of MAD data.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<ReqRepr> {
        packet.check_len()?;
        Ok(ReqRepr {
            local_comm_id: packet.local_comm_id(),
            service_id: packet.service_id(),
            local_ca_guid: packet.local_ca_guid(),
            local_q_key: packet.local_q_key(),
            local_qpn: packet.local_qpn(),
            responder_resources: packet.responder_resources(),
            local_eecn: packet.local_eecn(),
            initiator_depth: packet.initiator_depth(),
            remote_eecn: packet.remote_eecn(),
            remote_cm_response_timeout: packet.remote_cm_response_timeout(),
            transport_service_type: packet.transport_service_type(),
            end_to_end_flow_control: packet.end_to_end_flow_control(),
            starting_psn: packet.starting_psn(),
            local_cm_response_timeout: packet.local_cm_response_timeout(),
            retry_count: packet.retry_count(),
            partition_key: packet.partition_key(),
            path_mtu: packet.path_mtu(),
            rdc_exists: packet.rdc_exists(),
            rnr_retry_count: packet.rnr_retry_count(),
            max_cm_retries: packet.max_cm_retries(),
            srq: packet.srq(),
            extended_transport_type: packet.extended_transport_type(),
            primary_path: PathRepr::parse(&packet.primary_path())?,
            alternate_path: PathRepr::parse(&packet.alternate_path())?,
            sap_supported: packet.sap_supported(),
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
        packet.set_service_id(self.service_id);
        packet.set_local_ca_guid(self.local_ca_guid);
        packet.set_local_q_key(self.local_q_key);
        packet.set_local_qpn(self.local_qpn);
        packet.set_responder_resources(self.responder_resources);
        packet.set_local_eecn(self.local_eecn);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_remote_eecn(self.remote_eecn);
        packet.set_remote_cm_response_timeout(self.remote_cm_response_timeout);
        packet.set_transport_service_type(self.transport_service_type);
        packet.set_end_to_end_flow_control(self.end_to_end_flow_control);
        packet.set_starting_psn(self.starting_psn);
        packet.set_local_cm_response_timeout(self.local_cm_response_timeout);
        packet.set_retry_count(self.retry_count);
        packet.set_partition_key(self.partition_key);
        packet.set_path_mtu(self.path_mtu);
        packet.set_rdc_exists(self.rdc_exists);
        packet.set_rnr_retry_count(self.rnr_retry_count);
        packet.set_max_cm_retries(self.max_cm_retries);
        packet.set_srq(self.srq);
        packet.set_extended_transport_type(self.extended_transport_type);
        self.primary_path.emit(&mut packet.primary_path_mut());
        self.alternate_path.emit(&mut packet.alternate_path_mut());
        packet.set_sap_supported(self.sap_supported);
        packet
            .private_data_mut()
            .copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for ReqRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CM REQ local_comm_id={:#010x} service_id={:#x} qpn={:#x} psn={}",
            self.local_comm_id, self.service_id, self.local_qpn, self.starting_psn
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::test_util::{capture_data, zero_padded};
    use crate::cm::TRANSPORT_RC;
    use crate::Error;

    // The REQ of frame 1 of tests/data/rping_rdmacm.pcap (MAD data; zeros from byte 176 on).
    static PACKET_BYTES: [u8; MSG_LEN] = zero_padded(&[
        0x35, 0x70, 0xa4, 0x9b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x06, 0x1c,
        0x06, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x99, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x1c, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0xa0, 0x09,
        0x53, 0x01, 0xa7, 0xff, 0xff, 0x37, 0xf0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x0a, 0x63, 0x00, 0x03, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x0a, 0x63, 0x00, 0x02, 0x62, 0x2f,
        0xf0, 0x00, 0x00, 0x40, 0x00, 0x98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0xb5, 0xe7, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x63, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x63, 0x00, 0x02,
    ]);

    /// The rdma_cm private data of the REQ: version 0, IPv4, source port 0xb5e7 (46567),
    /// source IP 10.99.0.3, destination IP 10.99.0.2 (tshark's "IP CM Private Data").
    fn private_data() -> [u8; PRIVATE_DATA_LEN] {
        let mut pd = [0u8; PRIVATE_DATA_LEN];
        pd[..4].copy_from_slice(&[0x00, 0x40, 0xb5, 0xe7]);
        pd[16..20].copy_from_slice(&[10, 99, 0, 3]);
        pd[32..36].copy_from_slice(&[10, 99, 0, 2]);
        pd
    }

    fn repr() -> ReqRepr {
        ReqRepr {
            local_comm_id: 0x3570_a49b,
            service_id: 0x0000_0000_0106_1c06,
            local_ca_guid: 0x5054_00ff_fe99_0003,
            local_q_key: 0,
            local_qpn: 0x1c,
            responder_resources: 1,
            local_eecn: 0,
            initiator_depth: 1,
            remote_eecn: 0,
            remote_cm_response_timeout: 0x14,
            transport_service_type: TRANSPORT_RC,
            end_to_end_flow_control: false,
            starting_psn: Psn::new(0x09_5301),
            local_cm_response_timeout: 0x14,
            retry_count: 7,
            partition_key: 0xffff,
            path_mtu: 3,
            rdc_exists: false,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            srq: false,
            extended_transport_type: 0,
            primary_path: path::test::repr(),
            alternate_path: PathRepr::default(),
            sap_supported: false,
            private_data: private_data(),
        }
    }

    #[test]
    fn test_capture_bytes() {
        assert_eq!(PACKET_BYTES, capture_data(1));
    }

    /// The values tshark shows for frame 1 (`tshark -V`, "CM ConnectRequest").
    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(p.local_comm_id(), 0x3570a49b);
        assert_eq!(p.service_id(), 0x0000_0000_0106_1c06); // RDMA_PS_TCP, port 7174
        assert_eq!(p.local_ca_guid(), 0x505400fffe990003);
        assert_eq!(p.local_q_key(), 0);
        assert_eq!(p.local_qpn(), 0x00001c);
        assert_eq!(p.responder_resources(), 1);
        assert_eq!(p.local_eecn(), 0);
        assert_eq!(p.initiator_depth(), 1);
        assert_eq!(p.remote_eecn(), 0);
        assert_eq!(p.remote_cm_response_timeout(), 0x14);
        assert_eq!(p.transport_service_type(), 0);
        assert!(!p.end_to_end_flow_control());
        assert_eq!(p.starting_psn(), Psn::new(0x095301));
        assert_eq!(p.local_cm_response_timeout(), 0x14);
        assert_eq!(p.retry_count(), 7);
        assert_eq!(p.partition_key(), 0xffff);
        assert_eq!(p.path_mtu(), 3);
        assert!(!p.rdc_exists());
        assert_eq!(p.rnr_retry_count(), 7);
        assert_eq!(p.max_cm_retries(), 0xf);
        assert!(!p.srq());
        assert_eq!(p.extended_transport_type(), 0);
        let primary = p.primary_path();
        assert_eq!(primary.local_port_lid(), 65535);
        assert_eq!(primary.remote_port_lid(), 65535);
        assert_eq!(primary.local_port_gid()[12..], [10, 99, 0, 3]);
        assert_eq!(primary.remote_port_gid()[12..], [10, 99, 0, 2]);
        assert_eq!(primary.flow_label(), 0x622ff); // tshark 4.0 misreads this, see path.rs
        assert_eq!(primary.packet_rate(), 0);
        assert_eq!(primary.traffic_class(), 0);
        assert_eq!(primary.hop_limit(), 0x40);
        assert_eq!(primary.sl(), 0);
        assert!(!primary.subnet_local());
        assert_eq!(primary.local_ack_timeout(), 0x13);
        let alternate = p.alternate_path();
        assert_eq!(alternate.local_port_lid(), 0);
        assert_eq!(alternate.remote_port_lid(), 0);
        assert_eq!(alternate.local_port_gid(), [0; 16]);
        assert_eq!(alternate.remote_port_gid(), [0; 16]);
        assert_eq!(alternate.flow_label(), 0);
        assert_eq!(alternate.hop_limit(), 0);
        assert_eq!(alternate.local_ack_timeout(), 0);
        assert!(!p.sap_supported());
        assert_eq!(p.private_data(), &private_data()[..]);
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        p.set_local_comm_id(0x3570a49b);
        p.set_service_id(0x0106_1c06);
        p.set_local_ca_guid(0x505400fffe990003);
        p.set_local_q_key(0);
        p.set_local_qpn(0x1c);
        p.set_responder_resources(1);
        p.set_local_eecn(0);
        p.set_initiator_depth(1);
        p.set_remote_eecn(0);
        p.set_remote_cm_response_timeout(0x14);
        p.set_transport_service_type(TRANSPORT_RC);
        p.set_end_to_end_flow_control(false);
        p.set_starting_psn(Psn::new(0x095301));
        p.set_local_cm_response_timeout(0x14);
        p.set_retry_count(7);
        p.set_partition_key(0xffff);
        p.set_path_mtu(3);
        p.set_rdc_exists(false);
        p.set_rnr_retry_count(7);
        p.set_max_cm_retries(15);
        p.set_srq(false);
        p.set_extended_transport_type(0);
        path::test::repr().emit(&mut p.primary_path_mut());
        PathRepr::default().emit(&mut p.alternate_path_mut());
        p.set_sap_supported(false);
        p.private_data_mut().copy_from_slice(&private_data());
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn test_parse() {
        let p = Packet::new_unchecked(&PACKET_BYTES[..]);
        assert_eq!(ReqRepr::parse(&p).unwrap(), repr());
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
                what: "CM REQ",
                need: 232,
                have: 231
            }
        );
    }

    #[test]
    fn test_sap_supported_survives_clear_reserved() {
        let mut bytes = [0xffu8; MSG_LEN];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.clear_reserved();
        assert!(p.sap_supported());
        assert_eq!(bytes[95], 0xf8); // primary: Local ACK Timeout, reserved bits clear
        assert_eq!(bytes[139], 0xfc); // alternate: Local ACK Timeout + SAP Supported
        assert_eq!(bytes[4..8], [0; 4]);
        assert_eq!(bytes[24..28], [0; 4]);
    }
}

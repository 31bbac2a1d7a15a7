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

use super::layout::{self, message, Bits};
use super::{PathRepr, MSG_LEN};
use crate::Psn;

/// Bytes of private data in a REQ.
pub const PRIVATE_DATA_LEN: usize = 92;

/// The SAP Supported bit, in the reserved bits of the alternate path's Local ACK Timeout byte
/// (Linux `CM_REQ_SAP_SUPPORTED`).
const SAP_SUPPORTED: Bits = Bits::new(139, 2, 1);

message! {
    "CM REQ", MSG_LEN;
    /// A parsed REQ: every field of the message.
    pub struct ReqRepr {
        /// Local Communication ID: the sender's handle for this connection.
        value local_comm_id / set_local_comm_id: u32 = 0..4,
        /// ServiceID the passive side listens on (rdma_cm: 0x0000000001 | port space | port).
        value service_id / set_service_id: u64 = 8..16,
        /// Local CA GUID.
        value local_ca_guid / set_local_ca_guid: u64 = 16..24,
        /// Local Q_Key (used for RD only).
        value local_q_key / set_local_q_key: u32 = 28..32,
        /// Local QPN: the sender's QP (24 bits).
        value local_qpn / set_local_qpn: u32 = 32..35,
        /// Responder Resources: RDMA Read / atomic requests the sender accepts at once.
        value responder_resources / set_responder_resources: u8 = 35,
        /// Local EECN (RD only; 24 bits).
        value local_eecn / set_local_eecn: u32 = 36..39,
        /// Initiator Depth: RDMA Read / atomic requests the sender issues at once.
        value initiator_depth / set_initiator_depth: u8 = 39,
        /// Remote EECN (RD only; 24 bits).
        value remote_eecn / set_remote_eecn: u32 = 40..43,
        /// Remote CM Response Timeout (5 bits; 4.096 µs · 2^value).
        value remote_cm_response_timeout / set_remote_cm_response_timeout: u8 =
            Bits::new(43, 3, 5),
        /// Transport Service Type (2 bits, `TRANSPORT_*`).
        value transport_service_type / set_transport_service_type: u8 = Bits::new(43, 1, 2),
        /// End-to-End Flow Control.
        value end_to_end_flow_control / set_end_to_end_flow_control: bool = Bits::new(43, 0, 1),
        /// Starting PSN: the first PSN the sender will send.
        value starting_psn / set_starting_psn: Psn = 44..47,
        /// Local CM Response Timeout (5 bits).
        value local_cm_response_timeout / set_local_cm_response_timeout: u8 =
            Bits::new(47, 3, 5),
        /// Retry Count (3 bits).
        value retry_count / set_retry_count: u8 = Bits::new(47, 0, 3),
        /// Partition Key.
        value partition_key / set_partition_key: u16 = 48..50,
        /// Path Packet Payload MTU (4 bits, IBTA encoding: 3 = 1024 bytes).
        value path_mtu / set_path_mtu: u8 = Bits::new(50, 4, 4),
        /// RDC Exists.
        value rdc_exists / set_rdc_exists: bool = Bits::new(50, 3, 1),
        /// RNR Retry Count (3 bits; 7 = infinite).
        value rnr_retry_count / set_rnr_retry_count: u8 = Bits::new(50, 0, 3),
        /// Max CM Retries (4 bits).
        value max_cm_retries / set_max_cm_retries: u8 = Bits::new(51, 4, 4),
        /// SRQ: the sender's QP uses a shared receive queue.
        value srq / set_srq: bool = Bits::new(51, 3, 1),
        /// Extended Transport Type (3 bits; 0 unless XRC).
        value extended_transport_type / set_extended_transport_type: u8 = Bits::new(51, 0, 3),
        /// Primary path.
        path primary_path / primary_path_mut: PathRepr = 52..96,
        /// Alternate path (all zeros: none).
        path alternate_path / alternate_path_mut: PathRepr = 96..140,
        /// SAP Supported (bit 2 of byte 139; written after the alternate path, whose view
        /// counts it as reserved).
        value sap_supported / set_sap_supported: bool = SAP_SUPPORTED,
        /// Private Data (92 bytes; rdma_cm puts its IP header here).
        bytes private_data / private_data_mut: [u8; PRIVATE_DATA_LEN] = 140..232,
    }
    display(r) "local_comm_id={:#010x} service_id={:#x} qpn={:#x} psn={}",
        r.local_comm_id, r.service_id, r.local_qpn, r.starting_psn;
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes every reserved bit, those of both paths included (but not SAP Supported).
    pub fn clear_reserved(&mut self) {
        layout::clear(self.b_mut(), &[4..8, 24..28], &[]);
        self.primary_path_mut().clear_reserved();
        let sap = self.sap_supported();
        self.alternate_path_mut().clear_reserved();
        self.set_sap_supported(sap);
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::cm::path;
    use crate::cm::test_util::zero_padded;
    use crate::cm::TRANSPORT_RC;

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

    crate::cm::layout::message_tests!(ReqRepr, "CM REQ", 232, frame 1);

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

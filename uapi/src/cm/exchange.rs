//! What the REQ and the REP carry for rdma_cm, and the QP attributes that follow from them.
//!
//! * The REQ over RoCE as Linux fills it (IBTA 12.6.5; `cma_connect_ib`, `ib_send_cm_req`):
//!   GIDs from the IP addresses, P_Key 0xFFFF, LIDs 0xFFFF, the path MTU of the device, a
//!   random starting PSN, CM response timeouts 20, 15 CM retries, and the 36-byte IP header
//!   of annex A11 before the application's private data.
//! * The QP's attributes (`ib_cm_init_qp_attr`): INIT may be written REMOTE_WRITE, and READ
//!   and atomics too when this side offers responder resources; RTR takes the peer's QPN, the
//!   path MTU, this side's own starting PSN as `rq_psn` and its responder resources; RTS
//!   takes the peer's starting PSN as `sq_psn`, the ACK timeout, the retry counts and the
//!   initiator depth. (A side's starting PSN is the first PSN it *receives*: each side sends
//!   the other the PSN to start at.)

use std::net::IpAddr;

use softrnic_provider::device::Gid;
use softrnic_provider::mr::Access;
use softrnic_provider::qp::QpAttr;
use softrnic_provider::qp_state::{AttrMask, Mtu, QpState};
use softrnic_wire::cm::{self as wcm, IpHeader, PathRepr, PortSpace, RepRepr, ReqRepr};

use super::ConnParam;

/// The CM Response Timeout both sides announce (Linux `CMA_CM_RESPONSE_TIMEOUT`).
pub const CM_RESPONSE_TIMEOUT: u8 = 20;
/// Max CM Retries (Linux `CMA_MAX_CM_RETRIES`).
pub const MAX_CM_RETRIES: u8 = 15;
/// The packet lifetime of a RoCE path (Linux 6.x: `CMA_IBOE_PACKET_LIFETIME`).
pub const PACKET_LIFE_TIME: u8 = 16;
/// The ACK timeout a QP gets unless the id sets one: the path's packet lifetime + 1, as the
/// kernel's CM derives it.
pub const DEFAULT_ACK_TIMEOUT: u8 = PACKET_LIFE_TIME + 1;

/// The Local ACK Timeout (an exponent of 4.096 us) for a path of packet lifetime
/// `packet_life_time` to a CA that takes up to `ca_ack_delay` to ACK (IBTA 12.7.34: twice the
/// packet lifetime plus the peer's ACK delay; each term a power of two, their sum rounded up
/// to the next one), as Linux's CM computes it (`cm_ack_timeout`) for the active side from
/// the REP's Target ACK Delay. At most 31.
pub fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    // 2 x 2^plt = 2^(plt + 1); adding 2^d then lifts the larger exponent by one when the
    // smaller is within one of it (their sum then needs the next power of two).
    let round_trip = u32::from(packet_life_time) + 1;
    let delay = u32::from(ca_ack_delay);
    let t = if round_trip >= delay {
        round_trip + u32::from(delay + 1 >= round_trip)
    } else {
        delay + u32::from(round_trip + 1 >= delay)
    };
    t.min(31) as u8
}
/// The Q_Key of UD ids in the UDP and IPoIB port spaces (`RDMA_UDP_QKEY`).
pub const UDP_QKEY: u32 = 0x0123_4567;

/// What the two sides of a connection agreed on: what RTR and RTS need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// The peer's address.
    pub peer: IpAddr,
    /// The peer's QP.
    pub remote_qpn: u32,
    /// The first PSN this side receives: its own starting PSN.
    pub rq_psn: u32,
    /// The first PSN this side sends: the peer's starting PSN.
    pub sq_psn: u32,
    /// The path MTU.
    pub path_mtu: Mtu,
    /// READs and atomics this side serves at once (`max_dest_rd_atomic`).
    pub responder_resources: u8,
    /// READs and atomics this side issues at once (`max_rd_atomic`).
    pub initiator_depth: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// The QP's ACK timeout.
    pub ack_timeout: u8,
}

/// A random 24-bit starting PSN.
pub fn random_psn() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: `b` is 4 writable bytes; getrandom(2) fills at most that many.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    if n != 4 {
        // No entropy source: the time's low bits are random enough for a PSN.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        b = t.to_ne_bytes();
    }
    u32::from_ne_bytes(b) & 0x00ff_ffff
}

/// The resources of an offer, 0xFF ("the device's maximum") made concrete with `max`, and
/// never above it.
pub fn clamp_resources(asked: u8, max: u8) -> u8 {
    if asked == 0xff {
        max
    } else {
        asked.min(max)
    }
}

/// The REQ's fields that do not depend on the connection's state.
pub struct ReqInput<'a> {
    /// Source and destination addresses and ports.
    pub src: std::net::SocketAddr,
    /// The destination.
    pub dst: std::net::SocketAddr,
    /// The port space (the Service ID's).
    pub ps: PortSpace,
    /// The QP.
    pub qpn: u32,
    /// This side's starting PSN.
    pub psn: u32,
    /// The device's path MTU.
    pub mtu: Mtu,
    /// The offer (resources made concrete already).
    pub param: &'a ConnParam,
    /// The QP is UC (else RC).
    pub uc: bool,
    /// Traffic class (`RDMA_OPTION_ID_TOS`).
    pub tos: u8,
    /// ACK timeout of the path.
    pub ack_timeout: u8,
}

/// The REQ of an rdma_cm connection.
///
/// # Errors
/// `EINVAL`: more private data than fits after the IP header (56 bytes).
pub fn build_req(i: &ReqInput<'_>) -> Result<ReqRepr, i32> {
    let mut req = ReqRepr::zeroed();
    req.service_id = i.ps.service_id(i.dst.port());
    req.local_qpn = i.qpn;
    req.responder_resources = i.param.responder_resources;
    req.initiator_depth = i.param.initiator_depth;
    req.remote_cm_response_timeout = CM_RESPONSE_TIMEOUT;
    req.local_cm_response_timeout = CM_RESPONSE_TIMEOUT;
    req.transport_service_type = if i.uc {
        wcm::TRANSPORT_UC
    } else {
        wcm::TRANSPORT_RC
    };
    req.end_to_end_flow_control = i.param.flow_control != 0;
    req.starting_psn = softrnic_wire::Psn::new(i.psn);
    req.retry_count = i.param.retry_count.min(7);
    req.partition_key = 0xffff;
    req.path_mtu = i.mtu.ibv() as u8;
    req.rnr_retry_count = i.param.rnr_retry_count.min(7);
    req.max_cm_retries = MAX_CM_RETRIES;
    req.srq = i.param.srq != 0;
    req.primary_path = path(i.src.ip(), i.dst.ip(), i.tos, i.ack_timeout);
    req.private_data = with_header(i.src, i.dst, &i.param.private_data)?;
    Ok(req)
}

/// A RoCE path from `src` to `dst`.
fn path(src: IpAddr, dst: IpAddr, tos: u8, ack_timeout: u8) -> PathRepr {
    let mut p = PathRepr::zeroed();
    p.local_port_lid = 0xffff;
    p.remote_port_lid = 0xffff;
    p.local_port_gid = Gid::from_ip(src).to_raw();
    p.remote_port_gid = Gid::from_ip(dst).to_raw();
    p.traffic_class = tos;
    p.hop_limit = 64;
    // Not subnet local (IBTA 12.6.5): the LIDs are permissive and every packet carries a GRH,
    // RoCEv2's IP header. Linux sets the bit only for a hop limit of 1, and its passive side
    // replaces permissive LIDs with the received packet's only when the bit is clear.
    p.subnet_local = false;
    p.local_ack_timeout = ack_timeout.min(31);
    p
}

/// `N` bytes of private data: the IP header of `src` to `dst`, then `data`.
///
/// # Errors
/// `EINVAL` if `data` does not fit.
pub fn with_header<const N: usize>(
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    data: &[u8],
) -> Result<[u8; N], i32> {
    let mut pd = [0u8; N];
    let room = pd.len().saturating_sub(wcm::ip_service::HEADER_LEN);
    if data.len() > room {
        return Err(libc::EINVAL);
    }
    let h = IpHeader {
        src_port: src.port(),
        src: src.ip(),
        dst: dst.ip(),
    };
    h.emit(&mut pd).map_err(|_| libc::EINVAL)?;
    pd[wcm::ip_service::HEADER_LEN..][..data.len()].copy_from_slice(data);
    Ok(pd)
}

/// `data` copied into a message's field of `N` bytes.
///
/// # Errors
/// `EINVAL` if it does not fit.
pub fn field<const N: usize>(data: &[u8]) -> Result<[u8; N], i32> {
    let mut f = [0u8; N];
    f.get_mut(..data.len())
        .ok_or(libc::EINVAL)?
        .copy_from_slice(data);
    Ok(f)
}

/// The passive side's view of a REQ: the peer's offer as an event reports it (resources
/// swapped into this side's terms, the private data after the IP header).
pub fn offer_of_req(req: &ReqRepr) -> ConnParam {
    ConnParam {
        private_data: req.private_data[wcm::ip_service::HEADER_LEN..].to_vec(),
        responder_resources: req.initiator_depth,
        initiator_depth: req.responder_resources,
        flow_control: u8::from(req.end_to_end_flow_control),
        retry_count: req.retry_count,
        rnr_retry_count: req.rnr_retry_count,
        srq: u8::from(req.srq),
        qp_num: req.local_qpn,
    }
}

/// The active side's view of a REP.
pub fn offer_of_rep(rep: &RepRepr) -> ConnParam {
    ConnParam {
        private_data: rep.private_data.to_vec(),
        responder_resources: rep.initiator_depth,
        initiator_depth: rep.responder_resources,
        flow_control: u8::from(rep.end_to_end_flow_control),
        retry_count: 0,
        rnr_retry_count: rep.rnr_retry_count,
        srq: u8::from(rep.srq),
        qp_num: rep.local_qpn,
    }
}

/// The REP answering `req` with this side's `param` (resources concrete already), from a
/// device whose CA ACK delay is `ack_delay` (`local_ca_ack_delay`, an exponent): the REP's
/// Target ACK Delay (IBTA 12.6.8), as Linux fills it from the device.
///
/// # Errors
/// `EINVAL`: more than 196 bytes of private data.
pub fn build_rep(qpn: u32, psn: u32, param: &ConnParam, ack_delay: u8) -> Result<RepRepr, i32> {
    let mut rep = RepRepr::zeroed();
    rep.local_qpn = qpn;
    rep.starting_psn = softrnic_wire::Psn::new(psn);
    rep.target_ack_delay = ack_delay.min(31);
    rep.responder_resources = param.responder_resources;
    rep.initiator_depth = param.initiator_depth;
    rep.end_to_end_flow_control = param.flow_control != 0;
    rep.rnr_retry_count = param.rnr_retry_count.min(7);
    rep.srq = param.srq != 0;
    rep.private_data = field(&param.private_data)?;
    Ok(rep)
}

/// The attributes `rdma_init_qp_attr` gives for `state`: INIT before the exchange (`None`)
/// or after it, RTR and RTS after it.
///
/// # Errors
/// `EINVAL`: RTR or RTS before the exchange, or another state.
pub fn qp_attr(
    state: QpState,
    exchange: Option<&Exchange>,
    ud_qkey: Option<u32>,
) -> Result<(QpAttr, AttrMask), i32> {
    let mut a = QpAttr {
        qp_state: state,
        ..QpAttr::default()
    };
    let mask = match (state, exchange) {
        (QpState::Init, _) if ud_qkey.is_some() => {
            a.qkey = ud_qkey.unwrap_or(UDP_QKEY);
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY
        }
        (QpState::Init, x) => {
            a.qp_access_flags = match x {
                None => Access::empty(),
                Some(x) if x.responder_resources > 0 => {
                    Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
                }
                Some(_) => Access::REMOTE_WRITE,
            };
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS
        }
        (QpState::Rtr, _) if ud_qkey.is_some() => AttrMask::STATE,
        (QpState::Rts, _) if ud_qkey.is_some() => {
            a.sq_psn = 0;
            AttrMask::STATE | AttrMask::SQ_PSN
        }
        (QpState::Rtr, Some(x)) => {
            a.dest = x.peer;
            a.path_mtu = x.path_mtu;
            a.dest_qp_num = x.remote_qpn;
            a.rq_psn = x.rq_psn;
            a.max_dest_rd_atomic = x.responder_resources;
            a.min_rnr_timer = 0;
            AttrMask::STATE
                | AttrMask::AV
                | AttrMask::PATH_MTU
                | AttrMask::DEST_QPN
                | AttrMask::RQ_PSN
                | AttrMask::MAX_DEST_RD_ATOMIC
                | AttrMask::MIN_RNR_TIMER
        }
        (QpState::Rts, Some(x)) => {
            a.sq_psn = x.sq_psn;
            a.timeout = x.ack_timeout;
            a.retry_cnt = x.retry_count;
            a.rnr_retry = x.rnr_retry_count;
            a.max_rd_atomic = x.initiator_depth;
            AttrMask::STATE
                | AttrMask::SQ_PSN
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC
        }
        _ => return Err(libc::EINVAL),
    };
    Ok((a, mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux's values: rxe's ACK delay (15) and softrnic's leave the path's 17; a slower
    /// peer's delay takes over, one more when the two terms are close; never above 31.
    #[test]
    fn the_ack_timeout_adds_the_round_trip_and_the_peers_ack_delay() {
        let plt = PACKET_LIFE_TIME;
        let cases = [
            (0, 17),
            (15, 17),
            (16, 18),
            (17, 18),
            (18, 19),
            (20, 20),
            (31, 31),
        ];
        for (delay, want) in cases {
            assert_eq!(ack_timeout(delay, plt), want, "delay {delay}");
        }
        assert_eq!(ack_timeout(31, 31), 31);
        assert_eq!(ack_timeout(0, 0), 2);
    }
    use std::net::{Ipv4Addr, SocketAddr};

    fn sa(last: u8, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 0, last)), port)
    }

    /// The CM message of frame `n` (from 1) of the wire crate's capture of kernel rxe's
    /// rping, `rping_rdmacm.pcap`: 1 the REQ (10.99.0.3 port 46567 to 10.99.0.2 port 7174,
    /// QP 0x1c), 2 the REP (QP 0x1e).
    fn kernel_message(n: usize) -> wcm::CmMessage {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../wire/tests/data/rping_rdmacm.pcap"
        );
        let records = softrnic_wire::pcap::read_file(path).unwrap();
        let frame = softrnic_wire::frame::Frame::parse(&records[n - 1].data).unwrap();
        let mad = softrnic_wire::mad::Packet::new_checked(frame.datagram.payload).unwrap();
        wcm::CmMessage::parse(mad.attribute_id(), mad.data()).unwrap()
    }

    fn kernel_req() -> ReqRepr {
        let wcm::CmMessage::Req(req) = kernel_message(1) else {
            panic!("frame 1 is the REQ")
        };
        req
    }

    /// Given what rping gave the kernel (its QP, PSN, resources 1 and 1, no private data),
    /// the REQ is the kernel's, but for what is the sender's own: its Communication ID, CA
    /// GUID and flow label. So: TCP port 7174, GIDs ::ffff:10.99.0.3 -> ::ffff:10.99.0.2,
    /// LIDs 0xFFFF with Subnet Local 0, hop limit 64, P_Key 0xFFFF, MTU 1024, timeouts 20,
    /// 15 CM retries, retry and RNR retry 7, the IP header in the private data.
    #[test]
    fn a_req_is_filled_as_linux_fills_it() {
        let kernel = kernel_req();
        let param = ConnParam {
            responder_resources: 1,
            initiator_depth: 1,
            ..ConnParam::none()
        };
        let mut req = build_req(&ReqInput {
            src: sa(3, 46567),
            dst: sa(2, 7174),
            ps: PortSpace::Tcp,
            qpn: 0x1c,
            psn: kernel.starting_psn.value(),
            mtu: Mtu::Mtu1024,
            param: &param,
            uc: false,
            tos: 0,
            ack_timeout: kernel.primary_path.local_ack_timeout,
        })
        .unwrap();
        req.local_comm_id = kernel.local_comm_id;
        req.local_ca_guid = kernel.local_ca_guid;
        req.primary_path.flow_label = kernel.primary_path.flow_label;
        assert_eq!(req, kernel);
    }

    /// Accepting as rping does (resources 1 and 1, RNR retry 7, no private data) on a device
    /// with rxe's CA ACK delay, 15, the REP is the kernel's but for the sender's own
    /// Communication ID and CA GUID: Target ACK Delay 15 included.
    #[test]
    fn a_rep_is_filled_as_linux_fills_it() {
        let wcm::CmMessage::Rep(kernel) = kernel_message(2) else {
            panic!("frame 2 is the REP")
        };
        let param = ConnParam {
            responder_resources: 1,
            initiator_depth: 1,
            ..ConnParam::none()
        };
        let mut rep = build_rep(0x1e, kernel.starting_psn.value(), &param, 15).unwrap();
        rep.local_comm_id = kernel.local_comm_id;
        rep.remote_comm_id = kernel.remote_comm_id;
        rep.local_ca_guid = kernel.local_ca_guid;
        assert_eq!(rep, kernel);
    }

    #[test]
    fn the_private_data_follows_the_ip_header() {
        let param = ConnParam {
            private_data: vec![0xab; 56],
            ..ConnParam::none()
        };
        let req = build_req(&ReqInput {
            src: sa(3, 46567),
            dst: sa(2, 7174),
            ps: PortSpace::Tcp,
            qpn: 0x1c,
            psn: 0x095301,
            mtu: Mtu::Mtu1024,
            param: &param,
            uc: false,
            tos: 0,
            ack_timeout: DEFAULT_ACK_TIMEOUT,
        })
        .unwrap();
        let h = IpHeader::parse(&req.private_data).unwrap();
        assert_eq!(
            (h.src_port, h.src, h.dst),
            (46567, sa(3, 0).ip(), sa(2, 0).ip())
        );
        assert_eq!(offer_of_req(&req).private_data, vec![0xab; 56]);
    }

    #[test]
    fn private_data_beyond_the_header_room_is_einval() {
        let r: Result<[u8; wcm::req::PRIVATE_DATA_LEN], _> =
            with_header(sa(3, 1), sa(2, 2), &[0; 57]);
        assert_eq!(r, Err(libc::EINVAL));
        assert_eq!(field::<4>(&[1; 5]), Err(libc::EINVAL));
    }

    #[test]
    fn qp_attributes_follow_the_exchange() {
        let x = Exchange {
            peer: sa(2, 0).ip(),
            remote_qpn: 0x55,
            rq_psn: 100,
            sq_psn: 200,
            path_mtu: Mtu::Mtu1024,
            responder_resources: 0,
            initiator_depth: 4,
            retry_count: 7,
            rnr_retry_count: 6,
            ack_timeout: 17,
        };
        let (init, _) = qp_attr(QpState::Init, Some(&x), None).unwrap();
        assert_eq!(init.qp_access_flags, Access::REMOTE_WRITE);
        let (rtr, mask) = qp_attr(QpState::Rtr, Some(&x), None).unwrap();
        assert_eq!((rtr.dest_qp_num, rtr.rq_psn), (0x55, 100));
        assert!(mask.contains(AttrMask::AV));
        let (rts, _) = qp_attr(QpState::Rts, Some(&x), None).unwrap();
        assert_eq!((rts.sq_psn, rts.max_rd_atomic, rts.rnr_retry), (200, 4, 6));
        assert_eq!(qp_attr(QpState::Rtr, None, None).unwrap_err(), libc::EINVAL);
        let (ud, mask) = qp_attr(QpState::Init, None, Some(UDP_QKEY)).unwrap();
        assert_eq!(ud.qkey, UDP_QKEY);
        assert!(mask.contains(AttrMask::QKEY));
    }
}

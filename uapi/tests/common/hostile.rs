//! A hostile peer made of plain UDP sockets: a victim device over real kernel UDP whose RC QP
//! is connected to an address the test holds (its "peer", a socket on port 4791 of that
//! address, which sees whatever the victim sends it), and crafted RoCEv2 packets with the
//! ICRC a UDP socket's datagram from a given address carries (DF, IP ID 0: every test socket
//! has `IP_PMTUDISC_DO`).

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use softrnic_provider::nic::RxStats;
use softrnic_provider::transport::{seal_as_socket_sent, UdpTransport};
use softrnic_uapi::{Access, ConnectAttr, Mtu, RecvWr};
use softrnic_wire::aeth::AethRepr;
use softrnic_wire::bth::{self, BthRepr};
use softrnic_wire::reth::RethRepr;
use softrnic_wire::roce::{pad_len, RoceRepr};
use softrnic_wire::{Opcode, Psn, ROCE_V2_UDP_PORT};

use super::{Node, Setup};

/// The QPN the victim's QP is connected to (the test's peer has no QP: it is a socket).
pub const PEER_QPN: u32 = 0x11;

/// The victim's registered memory, every remote right.
pub const MEM_LEN: usize = 64 * 1024;

/// The bound on every wait for something that must come (never a timing assertion).
const HANG: Duration = Duration::from_secs(10);

/// How long a victim is watched for a reaction that must not come, once it has received
/// the packets (a missed late reaction can only make the check pass wrongly).
pub const QUIET: Duration = Duration::from_millis(100);

/// A UDP socket on `(addr, port)` whose IPv4 datagrams carry DF and IP ID 0.
pub fn socket(addr: IpAddr, port: u16) -> UdpSocket {
    let s = UdpSocket::bind((addr, port)).unwrap_or_else(|e| panic!("binding {addr}:{port}: {e}"));
    let (level, name, value) = match addr {
        IpAddr::V4(_) => (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        ),
        IpAddr::V6(_) => (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        ),
    };
    set_int(&s, level, name, value).unwrap();
    s.set_read_timeout(Some(HANG)).unwrap();
    s
}

/// `setsockopt(level, name, value)` of an int.
pub fn set_int(
    s: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: `value` is a valid int of the size passed, alive during the call.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A victim device on `transport`, its RC QP connected to `(peer, PEER_QPN)` with
/// PSN 0 both ways and path MTU `mtu`, with a region of [`MEM_LEN`] bytes; and the peer's
/// socket, port 4791 of `peer`.
pub fn victim(transport: UdpTransport, peer: IpAddr, mtu: Mtu) -> (Node, UdpSocket) {
    let peer_sock = socket(peer, ROCE_V2_UDP_PORT);
    let side = Setup::default().on_transport(Box::new(transport));
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let node = Node::new(side, MEM_LEN, all);
    node.qp
        .connect(&ConnectAttr {
            dest: peer,
            dest_qp_num: PEER_QPN,
            path_mtu: mtu,
            ..ConnectAttr::default()
        })
        .unwrap();
    (node, peer_sock)
}

impl Node {
    /// Posts a receive of the region's first `len` bytes.
    pub fn post_recv_of(&self, wr_id: u64, len: u32) {
        let wr = RecvWr {
            wr_id,
            sg_list: vec![self.mem.sge(0, len)],
        };
        self.qp.post_recv(&[wr]).unwrap();
    }

    /// The NIC's receive counters.
    pub fn rx(&self) -> RxStats {
        self.ctx.device().nic().rx
    }

    /// Waits until the transport has received `n` datagrams in all, then [`QUIET`] more so
    /// that they are handled.
    pub fn received(&self, n: u64) {
        let deadline = Instant::now() + HANG;
        while self.ctx.device().transport_stats().rx_packets < n {
            assert!(
                Instant::now() < deadline,
                "the victim never got {n} datagrams"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(QUIET);
    }

    /// No completion is pending on the CQ.
    pub fn no_completion(&self, what: &str) {
        use softrnic_uapi::{WcOpcode, WcStatus, WorkCompletion};
        let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 4];
        let n = self.cq.poll(&mut wcs).unwrap();
        assert_eq!(n, 0, "{what}: completed {:?}", &wcs[..n]);
    }

    /// The region's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = vec![0; MEM_LEN];
        self.mem.read(0, &mut out).unwrap();
        out
    }
}

/// Extension headers of a crafted packet.
#[derive(Default, Clone, Copy)]
pub struct Ext {
    pub reth: Option<RethRepr>,
    pub aeth: Option<AethRepr>,
}

/// The UDP payload of an RC packet of `opcode` to QP `qpn` at `psn` with `ext` and
/// `payload`, from `from` to `to`, with the ICRC a UDP socket sending it gives it.
pub fn packet(
    from: SocketAddr,
    to: IpAddr,
    (opcode, qpn, psn): (Opcode, u32, u32),
    ext: Ext,
    payload: &[u8],
) -> Vec<u8> {
    let mut roce = RoceRepr::new(BthRepr {
        opcode,
        solicited: false,
        mig_req: false,
        pkey: bth::DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp: qpn,
        ack_req: true,
        psn: Psn::new(psn),
    });
    roce.reth = ext.reth;
    roce.aeth = ext.aeth;
    roce.payload_len = payload.len();
    let mut b = vec![0u8; roce.header_len()];
    roce.emit_headers(&mut b).unwrap();
    b.extend_from_slice(payload);
    b.extend(std::iter::repeat_n(0, pad_len(payload.len()) + 4));
    assert!(seal_as_socket_sent(from, to, &mut b));
    b
}

/// Nothing arrives at `s` for [`QUIET`]; what came, if something did.
pub fn nothing_at(s: &UdpSocket) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(QUIET)).unwrap();
    let mut buf = [0u8; 9000];
    let got = s.recv(&mut buf).ok().map(|n| buf[..n].to_vec());
    s.set_read_timeout(Some(HANG)).unwrap();
    got
}

/// The next datagram at `s` (within the hang bound).
pub fn next_at(s: &UdpSocket) -> Vec<u8> {
    let mut buf = [0u8; 9000];
    let n = s.recv(&mut buf).expect("a datagram");
    buf[..n].to_vec()
}

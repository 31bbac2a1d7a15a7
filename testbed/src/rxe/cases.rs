//! The cases of the interop matrix (`matrix.rs`): each an rdma-core, perftest or rdma_cm
//! program pair, the operations its traffic must show on the wire, and how its client knows
//! the server is ready.

use softrnic_wire::opcode::{Operation, Transport};

/// One program pair. Its commands are templates: `{gid}` is the side's GID index of the
/// cell's family, `{mtu}` the path MTU, `{port}` the cell's port, `{me}` the side's own
/// address, `{server}` the server's address in the cell's family, `{server4}` the server's
/// IPv4 address (rdma-core's and perftest's servers take their setup exchange over IPv4 only).
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Its name in the table.
    pub name: &'static str,
    /// The server's command.
    pub server: &'static str,
    /// The client's command.
    pub client: &'static str,
    /// How the client knows the server is ready.
    pub listen: Listen,
    /// Operations that must cross the link.
    pub expect: &'static [(Transport, Operation)],
    /// Whether messages span several packets, so that the largest payload is the path MTU.
    pub full_mtu: bool,
}

use Operation as Op;
use Transport::{Rc, Uc, Ud};

/// Every case, in the table's order.
///
/// Kernel rxe under emulation takes well under 2000 packets a second and, with the host busy,
/// stops answering now and then for over half a second: a burst of 100 messages of 64 KiB
/// (6400 packets at path MTU 1024) once stalled it for 640 ms, longer than the requester's
/// seven retries of 67 ms (`timeout` 14), and the WRITE ended in RETRY_EXC_ERR. So the
/// bandwidth tools keep at most 8 messages of 16 KiB outstanding (`-t 8`), and they and
/// `verbs_op` wait 1.07 s per retry (`timeout` 18; perftest's `-u 18`).
pub const CASES: &[Case] = &[
    Case {
        name: "rc_pingpong",
        server: "ibv_rc_pingpong -g {gid} -m {mtu} -s 8192 -n 20 -c -p {port}",
        client: "ibv_rc_pingpong -g {gid} -m {mtu} -s 8192 -n 20 -c -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::Send), (Rc, Op::Acknowledge)],
        full_mtu: true,
    },
    Case {
        name: "uc_pingpong",
        server: "ibv_uc_pingpong -g {gid} -m {mtu} -s 8192 -n 20 -c -p {port}",
        client: "ibv_uc_pingpong -g {gid} -m {mtu} -s 8192 -n 20 -c -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Uc, Op::Send)],
        full_mtu: true,
    },
    Case {
        name: "ud_pingpong",
        server: "ibv_ud_pingpong -g {gid} -s 512 -n 20 -c -p {port}",
        client: "ibv_ud_pingpong -g {gid} -s 512 -n 20 -c -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Ud, Op::Send)],
        full_mtu: false,
    },
    Case {
        name: "srq_pingpong",
        server: "ibv_srq_pingpong -g {gid} -m {mtu} -s 8192 -n 20 -c -p {port}",
        client: "ibv_srq_pingpong -g {gid} -m {mtu} -s 8192 -n 20 -c -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::Send), (Rc, Op::Acknowledge)],
        full_mtu: true,
    },
    Case {
        name: "WRITE",
        server: "ib_write_bw -x {gid} -F -u 18 -m {mtu} -s 16384 -n 100 -t 8 -p {port}",
        client: "ib_write_bw -x {gid} -F -u 18 -m {mtu} -s 16384 -n 100 -t 8 -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::RdmaWrite), (Rc, Op::Acknowledge)],
        full_mtu: true,
    },
    Case {
        name: "WRITE_IMM",
        server: "verbs_op -o write_imm -g {gid} -m {mtu} -n 50 -s 8192 -p {port}",
        client: "verbs_op -o write_imm -g {gid} -m {mtu} -n 50 -s 8192 -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::RdmaWrite), (Rc, Op::Acknowledge)],
        full_mtu: true,
    },
    Case {
        name: "READ",
        server: "ib_read_bw -x {gid} -F -u 18 -m {mtu} -s 16384 -n 100 -t 8 -p {port}",
        client: "ib_read_bw -x {gid} -F -u 18 -m {mtu} -s 16384 -n 100 -t 8 -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::RdmaReadRequest), (Rc, Op::RdmaReadResponse)],
        full_mtu: true,
    },
    Case {
        name: "SEND",
        server: "ib_send_bw -x {gid} -F -u 18 -m {mtu} -s 16384 -n 100 -t 8 -p {port}",
        client: "ib_send_bw -x {gid} -F -u 18 -m {mtu} -s 16384 -n 100 -t 8 -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::Send), (Rc, Op::Acknowledge)],
        full_mtu: true,
    },
    Case {
        name: "CMP_SWP",
        server: "ib_atomic_bw -x {gid} -F -u 18 -m {mtu} -A CMP_AND_SWAP -n 100 -p {port}",
        client:
            "ib_atomic_bw -x {gid} -F -u 18 -m {mtu} -A CMP_AND_SWAP -n 100 -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::CompareSwap), (Rc, Op::AtomicAcknowledge)],
        full_mtu: false,
    },
    Case {
        name: "FETCH_ADD",
        server: "ib_atomic_bw -x {gid} -F -u 18 -m {mtu} -A FETCH_AND_ADD -n 100 -p {port}",
        client:
            "ib_atomic_bw -x {gid} -F -u 18 -m {mtu} -A FETCH_AND_ADD -n 100 -p {port} {server4}",
        listen: Listen::Tcp,
        expect: &[(Rc, Op::FetchAdd), (Rc, Op::AtomicAcknowledge)],
        full_mtu: false,
    },
    Case {
        name: "ATOMIC_WRITE",
        server: "verbs_op -o atomic_write -g {gid} -m {mtu} -n 50 -s 8 -p {port}",
        client: "verbs_op -o atomic_write -g {gid} -m {mtu} -n 50 -s 8 -p {port} {server4}",
        listen: Listen::Tcp,
        // IBTA 1.5 (9.4.8): an ATOMIC WRITE is answered like an RDMA READ of no bytes.
        expect: &[(Rc, Op::AtomicWrite), (Rc, Op::RdmaReadResponse)],
        full_mtu: false,
    },
    Case {
        name: "rdma_cm (rping)",
        server: "rping -s -v -C 10 -S 8192 -a {me} -p {port}",
        client: "rping -c -v -C 10 -S 8192 -a {server} -p {port}",
        listen: Listen::Cm("{port}"),
        // rping's data moves by RDMA READ and WRITE; the CM's MADs are UD SENDs to QP1.
        expect: &[
            (Rc, Op::RdmaReadRequest),
            (Rc, Op::RdmaWrite),
            (Ud, Op::Send),
        ],
        full_mtu: true,
    },
    Case {
        name: "rdma_cm (udaddy)",
        server: "udaddy -b {me}",
        client: "udaddy -s {server}",
        // udaddy's port is fixed.
        listen: Listen::Cm("7174"),
        // UD QPs found through the CM's SIDR_REQ/SIDR_REP, both UD SENDs to QP1.
        expect: &[(Ud, Op::Send)],
        full_mtu: false,
    },
];

/// How a server shows it is ready for its client.
#[derive(Debug, Clone, Copy)]
pub enum Listen {
    /// It listens on TCP `{port}` (its setup exchange).
    Tcp,
    /// It listens through rdma_cm, on this port (a template). In the guest, the kernel lists
    /// the listening ID (`rdma resource show cm_id`); softrnic's side gets two seconds, and
    /// a client the CM rejected for want of a listener (reason 8) tries again.
    Cm(&'static str),
}

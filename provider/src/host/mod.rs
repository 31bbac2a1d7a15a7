//! One device shared by every process of the host, as a NIC is.
//!
//! Any number of unrelated processes may use the device of one address at once, each with
//! its own QPs, CQs and memory; client and server may run on one address. What they share,
//! and how:
//!
//! * **QP numbers** ([`block`]): each process leases a block of the 24-bit QPN space, by
//!   binding an abstract Unix socket name the kernel frees when the process exits, however
//!   it exits. QPNs never collide across the host, and a crashed process's numbers are free
//!   again as soon as it is gone.
//! * **UDP port 4791** ([`steer`]): every process receives on its own socket of one
//!   `SO_REUSEPORT` group, and a classic BPF program in the kernel hands each datagram to the
//!   socket of its DestQP's block. No datagram passes through another process: no copy, no
//!   thread hop, one program run per datagram (about 3 % of a loopback datagram's cost, and
//!   a lone process pays it too). A datagram steered wrongly for a moment could only be
//!   dropped (its QPN is nobody's in that process), never delivered to the wrong QP.
//! * **The agent** ([`agent`]): what belongs to no single process. It creates the group's
//!   sockets in block order and keeps a duplicate of each, so the group's order (which the
//!   kernel changes when a member leaves) is its alone; it owns socket 0, where QP1's
//!   management datagrams, datagrams for unleased blocks and malformed ones arrive. The first
//!   process to open the device runs it, on a thread: an unmodified program loading
//!   `libibverbs.so.1` has no `softrnic` executable to start, and a multithreaded process may
//!   not `fork` one. When that process closes its device, it hands the group, descriptors
//!   and all, to another process ([`handover`]); if it dies instead, the next process to
//!   notice takes the role (the agent's name is an abstract socket too), and the group is
//!   built again.
//! * **Seeing it** ([`status`]): the leases are listed in `/proc/net/unix`, so `softrnic
//!   status` finds every process using a device there, and asks each for its QPs on its
//!   lease's socket.
//! * **Sending** needs nothing shared: each process sends from sockets of its own, one per
//!   UDP source port (`SO_REUSEADDR`, since two processes' QPs may hash to one source port);
//!   to another softrnic device of the host it writes into that process's inbox instead
//!   (`transport/udp/local/`, one inbox per process, named by its block).
//!
//! The connection manager's MADs (QP1, the next layer up) are routed by the agent
//! ([`mad_route`]): a REQ by its service ID to the process listening on it, every later MAD
//! of a connection by the communication ID it answers, whose high bits are the owning
//! process's QPN block, so the routing needs no table for connections. A REQ for a Service
//! ID nobody listens on waits a moment for its listener ([`unclaimed`]) before the agent
//! rejects it.

pub(crate) mod addr;
pub mod agent;
pub mod block;
pub mod cm_link;
pub(crate) mod fdpass;
pub mod handover;
pub mod mad_route;
pub mod member;
pub mod status;
pub mod steer;
pub mod unclaimed;

pub use member::Member;

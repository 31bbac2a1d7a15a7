//! The agent's hand-over: an agent whose process is closing its device gives the whole group
//! to another member's process, which goes on serving it with nothing changed.
//!
//! The group's order lives in its sockets (see [`super::steer`]): if the agent's process
//! simply exited, the duplicates it keeps would close, the kernel would move sockets into the
//! freed places, and every datagram of the host would be steered wrongly until the next agent
//! had built the group again. Those that arrived meanwhile were lost; a final ACK among them
//! ends its connection with a retry error once the peer has exited. So on a clean exit the
//! agent passes every descriptor it holds to a member, over that member's own connection
//! (`SCM_RIGHTS`, `unix(7)`): its listening name, the link to the connection managers, the
//! group's sockets in index order, the members' connections (their processes see nothing)
//! and who listens on which Service ID. Only a process that dies without closing its device
//! (a signal, `_exit`) leaves the members to build the group again.
//!
//! Messages are four bytes, `[kind, 0, value (le16)]`, each with at most one descriptor:
//!
//! ```text
//!  H  n     the agent's listener; n sockets follow
//!  L  0     the link
//!  K  i     socket i of the group, i = 0 .. n-1
//!  M  b     the connection of the member holding block b (one each)
//!  S  b     block b listens on the Service ID in the 8 bytes after (le64), no descriptor
//!  D  0     done
//! ```
//!
//! The member answers `T` once it holds everything, the old agent `A` to that, and then the
//! member's agent starts. A member whose connection is closed (its process is closing its
//! device too) is passed over for the next; the group stays whole meanwhile, since the old
//! agent keeps its descriptors until one has taken them.

use std::io::{self, Read, Write};
use std::net::{IpAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::time::Duration;

use super::agent::{Group, Member};
use super::block::QpnBlock;
use super::fdpass;

/// How long the agent waits for a member to take the group before asking the next.
const WAIT: Duration = Duration::from_secs(1);

/// The first message of a hand-over, naming the sockets that follow.
pub(super) const OFFER: u8 = b'H';

/// Gives `group` to the first member that takes it; with none, it is dropped (the members
/// then build a new one). A member whose connection is closed (its process is closing its
/// device too) is passed over; one that does not answer in time may have taken the group
/// all the same, so nobody else is asked: two agents must never serve one group.
pub(super) fn give(group: Group) {
    for to in &group.members {
        match offer(&group, &to.conn) {
            Err(e) if closed(&e) => continue,
            _ => return,
        }
    }
}

/// Whether `e` says the other end of the connection is closed.
fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
    )
}

/// Offers `group` over `conn`, the agent's end of a member's connection.
fn offer(group: &Group, conn: &UnixStream) -> io::Result<()> {
    conn.set_write_timeout(Some(WAIT))?;
    conn.set_read_timeout(Some(WAIT))?;
    let send = |kind: u8, value: usize, fd: Option<RawFd>| {
        let [lo, hi] = u16::try_from(value)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?
            .to_le_bytes();
        fdpass::send(conn, &[kind, 0, lo, hi], fd)
    };
    send(OFFER, group.slots.len(), Some(group.listener.as_raw_fd()))?;
    send(b'L', 0, Some(group.link.as_raw_fd()))?;
    for (i, slot) in group.slots.iter().enumerate() {
        send(b'K', i, Some(slot.as_raw_fd()))?;
    }
    for m in &group.members {
        send(b'M', usize::from(m.block.0), Some(m.conn.as_raw_fd()))?;
    }
    for (service, block) in group.listeners.entries() {
        send(b'S', usize::from(block.0), None)?;
        (&*conn).write_all(&service.to_le_bytes())?;
    }
    send(b'D', 0, None)?;
    let mut answer = [0u8; 4];
    match fdpass::recv(conn, &mut answer)? {
        Some(None) if answer[0] == b'T' => fdpass::send(conn, b"A\0\0\0", None),
        Some(_) => Err(io::ErrorKind::InvalidData.into()),
        None => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// Takes the group of `addr` offered on `conn` (a member's end), whose first message, `H` with
/// `slots` sockets, came with `listener`.
///
/// # Errors
/// The offer broke off (its agent's process ended) or is not a hand-over.
pub(super) fn take(
    addr: IpAddr,
    conn: &UnixStream,
    slots: u16,
    listener: OwnedFd,
) -> io::Result<Group> {
    let bad = || io::Error::from(io::ErrorKind::InvalidData);
    let next = || -> io::Result<(u8, u16, Option<OwnedFd>)> {
        let mut m = [0u8; 4];
        let fd = fdpass::recv(conn, &mut m)?.ok_or(io::ErrorKind::UnexpectedEof)?;
        Ok((m[0], u16::from_le_bytes([m[2], m[3]]), fd))
    };
    let link = match next()? {
        (b'L', _, Some(fd)) => UnixDatagram::from(fd),
        _ => return Err(bad()),
    };
    let mut sockets = Vec::with_capacity(usize::from(slots));
    for i in 0..slots {
        match next()? {
            (b'K', n, Some(fd)) if n == i => sockets.push(UdpSocket::from(fd)),
            _ => return Err(bad()),
        }
    }
    let mut group = Group::of(addr, UnixListener::from(listener), sockets, link);
    loop {
        match next()? {
            (b'M', block, Some(fd)) => group.members.push(Member {
                conn: UnixStream::from(fd),
                block: QpnBlock(block),
            }),
            (b'S', block, None) => {
                let mut service = [0u8; 8];
                (&*conn).read_exact(&mut service)?;
                let _ = group
                    .listeners
                    .listen(u64::from_le_bytes(service), QpnBlock(block));
            }
            (b'D', _, None) => return Ok(group),
            _ => return Err(bad()),
        }
    }
}

/// Tells the old agent, on `conn`, that the group is taken, and waits until it has read that
/// (its answer `A`, or [`WAIT`]): the new agent takes a member's connection that is readable
/// for ended, and this one must not be, with the answer unread in it.
///
/// # Errors
/// `sendmsg`'s, `setsockopt`'s.
pub(super) fn taken(conn: &UnixStream) -> io::Result<()> {
    fdpass::send(conn, b"T\0\0\0", None)?;
    conn.set_read_timeout(Some(WAIT))?;
    let _ = fdpass::recv(conn, &mut [0u8; 4]);
    conn.set_read_timeout(None)
}

#[cfg(test)]
mod tests {
    use crate::host::cm_link::MemberLink;
    use crate::host::Member;
    use softrnic_wire::ROCE_V2_UDP_PORT;
    use std::net::{IpAddr, Ipv4Addr, UdpSocket};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A BTH-sized datagram to the first QP of `member`'s block, from a new source port.
    fn to_block_of(member: &Member, addr: IpAddr) {
        let mut bth = [0u8; 12];
        bth[4..8].copy_from_slice(&(member.block().first() + 1).to_be_bytes());
        let tx = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        tx.send_to(&bth, (addr, ROCE_V2_UDP_PORT)).unwrap();
    }

    fn received(s: &UdpSocket) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.recv(&mut [0u8; 64]).is_ok()
    }

    /// The agent's process closing its device hands the group to another member: that
    /// member runs the agent, keeps its socket (never told to adopt another), its datagrams
    /// keep coming to it, a new process can join, and the Service ID it listened on is still
    /// its own.
    #[test]
    fn a_closing_agent_hands_its_group_over_unchanged() {
        let addr = IpAddr::V4(Ipv4Addr::new(127, 0, 41, 18));
        let (first, _first_sock) = Member::join(addr).unwrap();
        assert!(first.runs_agent());
        let (second, sock) = Member::join(addr).unwrap();
        let adopted = Arc::new(AtomicUsize::new(0));
        let counted = adopted.clone();
        let adopt = Box::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(())
        });
        second
            .watch("lo", adopt, Box::new(Default::default))
            .unwrap();
        let link = MemberLink::open(addr, second.block()).unwrap();
        link.listen(0x0106_0018).unwrap();
        to_block_of(&second, addr);
        assert!(received(&sock), "before the hand-over");

        drop(first);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !second.runs_agent() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            second.runs_agent(),
            "the second process took the agent over"
        );
        to_block_of(&second, addr);
        assert!(received(&sock), "after the hand-over, on the same socket");
        let (third, third_sock) = Member::join(addr).unwrap();
        to_block_of(&third, addr);
        assert!(received(&third_sock), "a process joining the new agent");
        let other = MemberLink::open(addr, third.block()).unwrap();
        let in_use = other.listen(0x0106_0018).unwrap_err();
        assert_eq!(in_use.raw_os_error(), Some(libc::EADDRINUSE));
        assert_eq!(
            adopted.load(Ordering::Relaxed),
            0,
            "no group was built again"
        );
    }
}

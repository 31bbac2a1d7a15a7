//! The few socket calls std lacks, for the raw UDP baseline: `sendmmsg`, `recvmmsg`, socket
//! buffer sizes and UDP's own options. Each call is one syscall on memory the caller prepared; nothing here allocates.

use std::io;
use std::mem::size_of;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::ptr;

/// A `mmsghdr` for a connected socket (no address) over one iovec.
pub(crate) fn mmsghdr(iov: *mut libc::iovec) -> libc::mmsghdr {
    // SAFETY: mmsghdr is plain data; all-zero is a valid value (null pointers, zero lengths).
    let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
    h.msg_hdr.msg_iov = iov;
    h.msg_hdr.msg_iovlen = 1;
    h
}

/// One `sendmmsg` on a connected blocking socket. Returns how many datagrams the kernel took;
/// 0 when the send timeout (`SO_SNDTIMEO`) ran out, on a signal, or when the kernel was out of
/// buffers, so that the caller can look at its clock and try again.
///
/// # Safety
/// Every header must point to iovecs and buffers that are valid for reads during the call.
pub(crate) unsafe fn sendmmsg(s: &UdpSocket, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let r = libc::sendmmsg(s.as_raw_fd(), hdrs.as_mut_ptr(), hdrs.len() as _, 0);
    if r >= 0 {
        return Ok(r as usize);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR | libc::ENOBUFS) => Ok(0),
        _ => Err(err),
    }
}

/// One `recvmmsg` with `MSG_WAITFORONE`: waits (at most the socket's `SO_RCVTIMEO`) for one
/// datagram, then takes whatever else is queued, up to `hdrs.len()`. Returns how many it read;
/// `None` when the wait timed out or a signal came.
///
/// # Safety
/// Every header must point to iovecs and buffers that are valid for writes during the call and
/// not otherwise accessed during it.
pub(crate) unsafe fn recvmmsg(
    s: &UdpSocket,
    hdrs: &mut [libc::mmsghdr],
) -> io::Result<Option<usize>> {
    let r = libc::recvmmsg(
        s.as_raw_fd(),
        hdrs.as_mut_ptr(),
        hdrs.len() as _,
        libc::MSG_WAITFORONE as _,
        ptr::null_mut(),
    );
    if r >= 0 {
        return Ok(Some(r as usize));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR) => Ok(None),
        _ => Err(err),
    }
}

/// Which of a socket's two buffers.
#[derive(Clone, Copy)]
pub(crate) enum Buffer {
    Send,
    Recv,
}

/// Asks for a `bytes`-sized buffer: first with `SO_{SND,RCV}BUFFORCE`, which passes the
/// `net.core.{w,r}mem_max` cap but needs `CAP_NET_ADMIN`, then with the plain option, which the
/// kernel caps silently. Returns the size the kernel then reports (it doubles the request, for
/// its bookkeeping).
pub(crate) fn grow_buffer(s: &UdpSocket, which: Buffer, bytes: usize) -> io::Result<usize> {
    let (force, plain) = match which {
        Buffer::Send => (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        Buffer::Recv => (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
    };
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if setsockopt(s, libc::SOL_SOCKET, force, v).is_err() {
        setsockopt(s, libc::SOL_SOCKET, plain, v)?;
    }
    getsockopt(s, plain).map(|v| v as usize)
}

/// Sets the UDP-level (`SOL_UDP`) option `name` to `v`: `UDP_SEGMENT`, `UDP_GRO`.
pub(crate) fn set_udp_option(s: &UdpSocket, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    setsockopt(s, libc::SOL_UDP, name, v)
}

fn setsockopt(
    s: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: v outlives the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt(s: &UdpSocket, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len outlive the call; len holds v's size.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

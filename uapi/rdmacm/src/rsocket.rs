//! The rsocket calls of `<rdma/rsocket.h>` (rdma-core 44 `librdmacm/rsocket.c`, all
//! `RDMACM_1.0`): rsockets are not supported on softrnic.
//!
//! * `rsocket` fails with `errno = EOPNOTSUPP`, so no rsocket ever exists.
//! * Every call on an rsocket (`rbind` ... `riowrite`) therefore fails as rdma-core's does for a
//!   descriptor that is not one: -1 (`(size_t)-1` for `riowrite`) with `errno = EBADF`.
//!   `rclose` returns the value `EBADF` itself, as rdma-core 44's does (it does not return -1
//!   there), and sets `errno` too.
//! * `rpoll` is `poll(2)` and `rselect` is `select(2)`: rdma-core's `rpoll` hands every
//!   descriptor that is not an rsocket to `poll(2)`, and its tools rely on that: every tool
//!   built with `common.c` (rping, ucmatose, udaddy, mckey, cmtime) waits on the CM event
//!   channel's descriptor with `rpoll`.
//!
//! So rstream, riostream, rcopy and udpong load and print their usage, and fail when they open
//! their first rsocket.

use libc::{
    c_int, c_long, c_void, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, size_t, sockaddr,
    socklen_t, ssize_t, timeval,
};

use crate::export::export;
use crate::ffi::{catch, set_errno, Failure};

export! { "RDMACM_1.0";
    /// `int rsocket(int domain, int type, int protocol)`: -1 with `errno = EOPNOTSUPP`, rsockets
    /// are not supported on softrnic.
    unsafe extern "C" fn rsocket(domain: c_int, type_: c_int, protocol: c_int) -> c_int {
        let _ = (domain, type_, protocol);
        set_errno(libc::EOPNOTSUPP);
        -1
    }
}

export! { "RDMACM_1.0";
    /// `int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)`: `poll(2)`, what rdma-core's
    /// does for descriptors that are not rsockets (here none is).
    unsafe extern "C" fn rpoll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
        // SAFETY: the caller's contract is poll(2)'s: `fds` holds `nfds` entries.
        catch(|| unsafe { libc::poll(fds, nfds, timeout) })
    }
}

export! { "RDMACM_1.0";
    /// `int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
    /// struct timeval *timeout)`: `select(2)` (see `rpoll`).
    unsafe extern "C" fn rselect(
        nfds: c_int,
        readfds: *mut fd_set,
        writefds: *mut fd_set,
        exceptfds: *mut fd_set,
        timeout: *mut timeval,
    ) -> c_int {
        // SAFETY: the caller's contract is select(2)'s: each pointer NULL or a valid set/time.
        catch(|| unsafe { libc::select(nfds, readfds, writefds, exceptfds, timeout) })
    }
}

export! { "RDMACM_1.0";
    /// `int rclose(int socket)`: no rsocket exists, so `socket` is not one; like rdma-core 44,
    /// returns the value `EBADF` (not -1), and sets `errno = EBADF`.
    unsafe extern "C" fn rclose(socket: c_int) -> c_int {
        let _ = socket;
        set_errno(libc::EBADF);
        libc::EBADF
    }
}

export! { "RDMACM_1.0";
    /// `int rfcntl(int socket, int cmd, ... /* arg */)`: -1 with `errno = EBADF` (no rsocket
    /// exists). The C function is variadic, which stable Rust cannot define; on x86-64 (System
    /// V) a variadic call passes its integer and pointer arguments in the same registers as a
    /// plain call (and `%al`, the vector register count, which a non-variadic callee ignores),
    /// so the optional third argument is read as a plain register-sized integer. It is unused.
    unsafe extern "C" fn rfcntl(socket: c_int, cmd: c_int, arg: c_long) -> c_int {
        let _ = (socket, cmd, arg);
        set_errno(libc::EBADF);
        -1
    }
}

/// `fn name(args) -> T;` lines: each exports `name@@RDMACM_1.0` failing with `errno = EBADF`
/// and the error value of `T` ([`Failure`]), since `socket` cannot be an rsocket. The bodies
/// touch no argument, so they are safe for any input and cannot panic.
macro_rules! not_an_rsocket {
    ($($(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(
        export! { "RDMACM_1.0";
            $(#[$m])*
            unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
                let _ = ($($arg,)*);
                set_errno(libc::EBADF);
                <$ret as Failure>::failure()
            }
        }
    )*};
}

not_an_rsocket! {
    /// `int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)`.
    fn rbind(socket: c_int, addr: *const sockaddr, addrlen: socklen_t) -> c_int;
    /// `int rlisten(int socket, int backlog)`.
    fn rlisten(socket: c_int, backlog: c_int) -> c_int;
    /// `int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)`.
    fn raccept(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int;
    /// `int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)`.
    fn rconnect(socket: c_int, addr: *const sockaddr, addrlen: socklen_t) -> c_int;
    /// `int rshutdown(int socket, int how)`.
    fn rshutdown(socket: c_int, how: c_int) -> c_int;
    /// `ssize_t rrecv(int socket, void *buf, size_t len, int flags)`.
    fn rrecv(socket: c_int, buf: *mut c_void, len: size_t, flags: c_int) -> ssize_t;
    /// `ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
    /// struct sockaddr *src_addr, socklen_t *addrlen)`.
    fn rrecvfrom(
        socket: c_int,
        buf: *mut c_void,
        len: size_t,
        flags: c_int,
        src_addr: *mut sockaddr,
        addrlen: *mut socklen_t,
    ) -> ssize_t;
    /// `ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)`.
    fn rrecvmsg(socket: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
    /// `ssize_t rsend(int socket, const void *buf, size_t len, int flags)`.
    fn rsend(socket: c_int, buf: *const c_void, len: size_t, flags: c_int) -> ssize_t;
    /// `ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
    /// const struct sockaddr *dest_addr, socklen_t addrlen)`.
    fn rsendto(
        socket: c_int,
        buf: *const c_void,
        len: size_t,
        flags: c_int,
        dest_addr: *const sockaddr,
        addrlen: socklen_t,
    ) -> ssize_t;
    /// `ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)`.
    fn rsendmsg(socket: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    /// `ssize_t rread(int socket, void *buf, size_t count)`.
    fn rread(socket: c_int, buf: *mut c_void, count: size_t) -> ssize_t;
    /// `ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)`.
    fn rreadv(socket: c_int, iov: *const iovec, iovcnt: c_int) -> ssize_t;
    /// `ssize_t rwrite(int socket, const void *buf, size_t count)`.
    fn rwrite(socket: c_int, buf: *const c_void, count: size_t) -> ssize_t;
    /// `ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)`.
    fn rwritev(socket: c_int, iov: *const iovec, iovcnt: c_int) -> ssize_t;
    /// `int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)`.
    fn rgetpeername(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int;
    /// `int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)`.
    fn rgetsockname(socket: c_int, addr: *mut sockaddr, addrlen: *mut socklen_t) -> c_int;
    /// `int rsetsockopt(int socket, int level, int optname, const void *optval,
    /// socklen_t optlen)`.
    fn rsetsockopt(
        socket: c_int,
        level: c_int,
        optname: c_int,
        optval: *const c_void,
        optlen: socklen_t,
    ) -> c_int;
    /// `int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)`.
    fn rgetsockopt(
        socket: c_int,
        level: c_int,
        optname: c_int,
        optval: *mut c_void,
        optlen: *mut socklen_t,
    ) -> c_int;
    /// `off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)`.
    fn riomap(
        socket: c_int,
        buf: *mut c_void,
        len: size_t,
        prot: c_int,
        flags: c_int,
        offset: off_t,
    ) -> off_t;
    /// `int riounmap(int socket, void *buf, size_t len)`.
    fn riounmap(socket: c_int, buf: *mut c_void, len: size_t) -> c_int;
    /// `size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)`:
    /// `(size_t)-1` on error.
    fn riowrite(
        socket: c_int,
        buf: *const c_void,
        count: size_t,
        offset: off_t,
        flags: c_int,
    ) -> size_t;
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::ptr::{null, null_mut};

    /// The calling thread's errno.
    fn errno() -> c_int {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    /// A pipe: (read end, write end).
    fn pipe() -> (c_int, c_int) {
        let mut fds = [0; 2];
        // SAFETY: a 2-int array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        (fds[0], fds[1])
    }

    fn close(fd: c_int) {
        // SAFETY: a descriptor this test opened.
        unsafe { libc::close(fd) };
    }

    /// A descriptor that is not open. Not one a test just closed: the tests run in parallel
    /// threads, and another could reopen that number. The kernel hands out the lowest free
    /// number, so a test process never reaches 1000 (below select(2)'s FD_SETSIZE) by itself;
    /// but select(2) silently ignores numbers beyond the process's descriptor table, so the
    /// table is first grown past it, with a copy at 1001, closed again (it never shrinks).
    fn not_open() -> c_int {
        const FD: c_int = 1000;
        let (r, w) = pipe();
        // SAFETY: copies a descriptor this test opened to a number no other test uses.
        assert_eq!(unsafe { libc::dup2(r, FD + 1) }, FD + 1);
        close(FD + 1);
        close(r);
        close(w);
        // SAFETY: F_GETFD only queries.
        assert_eq!(
            unsafe { libc::fcntl(FD, libc::F_GETFD) },
            -1,
            "fd {FD} is open"
        );
        FD
    }

    #[test]
    fn rpoll_is_poll_on_a_pipe() {
        let (r, w) = pipe();
        let mut fds = [
            pollfd {
                fd: r,
                events: libc::POLLIN,
                revents: 0,
            },
            pollfd {
                fd: w,
                events: libc::POLLOUT,
                revents: 0,
            },
        ];
        // Nothing to read yet: only the write end is ready.
        // SAFETY: two valid entries.
        assert_eq!(unsafe { rpoll(fds.as_mut_ptr(), 2, 0) }, 1);
        assert_eq!((fds[0].revents, fds[1].revents), (0, libc::POLLOUT));
        // SAFETY: one byte from a live buffer into the pipe.
        assert_eq!(unsafe { libc::write(w, b"x".as_ptr().cast(), 1) }, 1);
        // SAFETY: as above; a timeout, which poll(2) would not need.
        assert_eq!(unsafe { rpoll(fds.as_mut_ptr(), 2, 1000) }, 2);
        assert_eq!(fds[0].revents, libc::POLLIN);
        // The writer gone, the buffered byte is still there to read.
        close(w);
        // SAFETY: one valid entry.
        assert_eq!(unsafe { rpoll(fds.as_mut_ptr(), 1, 0) }, 1);
        assert_ne!(fds[0].revents & libc::POLLIN, 0, "data still buffered");
        close(r);
        // poll(2) reports a descriptor that is not open, in revents.
        let mut bad = [pollfd {
            fd: not_open(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one entry.
        assert_eq!(unsafe { rpoll(bad.as_mut_ptr(), 1, 0) }, 1);
        assert_eq!(bad[0].revents, libc::POLLNVAL);
    }

    #[test]
    fn rselect_is_select_on_a_pipe() {
        let (r, w) = pipe();
        // SAFETY: fd_set is plain data; FD_ZERO/FD_SET/FD_ISSET on descriptors below FD_SETSIZE.
        unsafe {
            let mut read: fd_set = std::mem::zeroed();
            libc::FD_SET(r, &mut read);
            let mut zero = timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            assert_eq!(
                rselect(r + 1, &mut read, null_mut(), null_mut(), &mut zero),
                0
            );
            assert!(!libc::FD_ISSET(r, &read), "select clears what is not ready");

            assert_eq!(libc::write(w, b"x".as_ptr().cast(), 1), 1);
            libc::FD_SET(r, &mut read);
            let mut second = timeval {
                tv_sec: 1,
                tv_usec: 0,
            };
            assert_eq!(
                rselect(r + 1, &mut read, null_mut(), null_mut(), &mut second),
                1
            );
            assert!(libc::FD_ISSET(r, &read));

            close(r);
            close(w);

            // select(2)'s own errors come through: a descriptor that is not open is EBADF.
            let bad = not_open();
            let mut set: fd_set = std::mem::zeroed();
            libc::FD_SET(bad, &mut set);
            assert_eq!(
                rselect(bad + 1, &mut set, null_mut(), null_mut(), &mut zero),
                -1
            );
            assert_eq!(errno(), libc::EBADF);
        }
    }

    #[test]
    fn rsocket_is_not_supported() {
        // SAFETY: no pointer arguments.
        assert_eq!(unsafe { rsocket(libc::AF_INET, libc::SOCK_STREAM, 0) }, -1);
        assert_eq!(errno(), libc::EOPNOTSUPP);
    }

    #[test]
    fn calls_on_an_rsocket_fail_with_ebadf_as_for_a_descriptor_that_is_not_one() {
        let mut buf = [0u8; 8];
        let p = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: the functions touch no argument.
        unsafe {
            assert_eq!(rbind(3, null(), 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(rconnect(3, null(), 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(rrecv(3, p, 8, 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(rsend(3, p, 8, 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(rsetsockopt(3, 0, 0, p, 4), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(rfcntl(3, libc::F_GETFL, 0), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(riomap(3, p, 8, libc::PROT_WRITE, 0, -1), -1);
            assert_eq!(errno(), libc::EBADF);
            assert_eq!(riowrite(3, p, 8, 0, 0), usize::MAX);
            assert_eq!(errno(), libc::EBADF);
            // rdma-core 44's rclose returns EBADF itself.
            assert_eq!(rclose(3), libc::EBADF);
            assert_eq!(errno(), libc::EBADF);
        }
    }
}

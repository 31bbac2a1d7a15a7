//! The devices running in this process, one per address, shared by every context opened on
//! it (`ibv_open_device` of one device any number of times, as rdma-core's tests and the
//! connection manager do). A device binds its address's UDP port 4791 once; a second device
//! on the same address in the same process would compete with the first for its packets.
//!
//! The registry holds the devices weakly: a device stops when its last context closes, and
//! the next open starts it again.

use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::context::Shared;

/// The running devices, by address. A handful at most: a list.
static RUNNING: Mutex<Vec<(IpAddr, Weak<Shared>)>> = Mutex::new(Vec::new());

/// The device running for `addr`, or one `start` starts (and registers) if there is none.
/// Opens are serialised, so two threads opening one address get one device.
///
/// # Errors
/// `start`'s.
pub(crate) fn open(
    addr: IpAddr,
    start: impl FnOnce() -> io::Result<Shared>,
) -> io::Result<Arc<Shared>> {
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    running.retain(|(_, d)| d.strong_count() > 0);
    if let Some(d) = running
        .iter()
        .find(|(a, _)| *a == addr)
        .and_then(|(_, d)| d.upgrade())
    {
        return Ok(d);
    }
    let d = Arc::new(start()?);
    running.push((addr, Arc::downgrade(&d)));
    Ok(d)
}

/// A new device for `addr` that `start` starts (and registers), if none runs for it yet.
///
/// # Errors
/// `EADDRINUSE` if one runs; `start`'s.
pub(crate) fn open_new(
    addr: IpAddr,
    start: impl FnOnce() -> io::Result<Shared>,
) -> io::Result<Arc<Shared>> {
    let mut started = false;
    let d = open(addr, || {
        started = true;
        start()
    })?;
    if !started {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("the device of {addr} already runs in this process"),
        ));
    }
    Ok(d)
}

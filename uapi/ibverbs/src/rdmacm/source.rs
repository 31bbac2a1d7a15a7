//! Where the connection manager's ids find their devices in a C program: the process's
//! devices as `ibv_get_device_list` offers them (`SOFTRNIC_ADDR` included), each opened once
//! by the library and kept open, as librdmacm keeps one `ibv_context` per device (programs
//! hold `id->verbs` after the id is gone), with one PD per device for the ids given none
//! (`id->pd`).

use std::io;
use std::net::IpAddr;
use std::sync::Mutex;

use softrnic_provider::device::InterfaceInfo;
use softrnic_uapi::cm::DeviceSource;
use softrnic_uapi::Context;

use crate::abi::context::ibv_context;
use crate::abi::objects::ibv_pd;
use crate::{context, devices};

/// The library's open devices: (address, context, shared PD), as addresses of C objects.
static OPEN: Mutex<Vec<(IpAddr, usize, usize)>> = Mutex::new(Vec::new());

/// The library's context on the device of local address `addr`, opened on first use.
///
/// # Errors
/// `EADDRNOTAVAIL` if no interface has the address; the errno of opening it.
pub(crate) fn context_for(addr: IpAddr) -> Result<*mut ibv_context, i32> {
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, c, _)) = open.iter().find(|(a, _, _)| *a == addr) {
        return Ok(*c as *mut ibv_context);
    }
    let dev = devices::for_address(addr).map_err(|_| libc::EADDRNOTAVAIL)?;
    let ctx = context::open(dev);
    if ctx.is_null() {
        return Err(libc::ENOMEM);
    }
    open.push((addr, ctx as usize, 0));
    Ok(ctx)
}

/// The PD of the library's context `ctx` (allocated on first use), or NULL.
pub(crate) fn pd_for(ctx: *mut ibv_context) -> *mut ibv_pd {
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    let Some(entry) = open.iter_mut().find(|(_, c, _)| *c == ctx as usize) else {
        return std::ptr::null_mut();
    };
    if entry.2 == 0 {
        // SAFETY: `ctx` is a context this library opened and never closes.
        entry.2 = unsafe { crate::verbs::pd::ibv_alloc_pd(ctx) } as usize;
    }
    entry.2 as *mut ibv_pd
}

/// Every context the library opened (`rdma_get_devices`), after opening those of the
/// devices the process sees.
pub(crate) fn all_contexts() -> Vec<*mut ibv_context> {
    for d in devices::list().unwrap_or_default() {
        let _ = context_for(d.addr);
    }
    let open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    open.iter()
        .map(|(_, c, _)| *c as *mut ibv_context)
        .collect()
}

/// The running device behind `ctx`.
fn runtime(ctx: *mut ibv_context) -> io::Result<Context> {
    let soft = context::lookup(ctx).ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
    soft.runtime()
        .cloned()
        .map_err(io::Error::from_raw_os_error)
}

/// The devices of this process for the connection manager.
struct Devices;

impl DeviceSource for Devices {
    fn open(&self, addr: IpAddr) -> io::Result<Context> {
        let ctx = context_for(addr).map_err(io::Error::from_raw_os_error)?;
        runtime(ctx)
    }

    fn device_for(&self, routed: IpAddr) -> Option<IpAddr> {
        let listed = devices::list().ok()?;
        if let Some(d) = listed.iter().find(|d| d.addr == routed) {
            return Some(d.addr);
        }
        // The device on the interface the route leaves from: with SOFTRNIC_ADDR=127.0.0.2,
        // a route from 127.0.0.1 (lo) leaves from lo's device, 127.0.0.2.
        let ifaces = InterfaceInfo::list().ok()?;
        let iface = InterfaceInfo::owning(&ifaces, routed)?;
        listed
            .iter()
            .find(|d| {
                InterfaceInfo::owning(&ifaces, d.addr).is_some_and(|i| i.index == iface.index)
            })
            .map(|d| d.addr)
    }

    fn addresses(&self) -> Vec<IpAddr> {
        devices::list()
            .unwrap_or_default()
            .iter()
            .map(|d| d.addr)
            .collect()
    }
}

/// Makes this library's devices the connection manager's (once, before any id).
pub(crate) fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        softrnic_uapi::cm::set_device_source(Box::new(Devices));
    });
}

//! Open devices: the memory behind the `ibv_context` that `ibv_open_device` returns.
//!
//! A [`SoftContext`] is a `verbs_context` (whose last field is the `ibv_context`) followed by
//! softrnic's state, so the `ibv_context` has the `verbs_context` immediately before it, as
//! verbs.h's inline functions require. `abi_compat` is `UINTPTR_MAX` and `sz` the full
//! `sizeof(struct verbs_context)`, so inline code trusts every op; the ones softrnic has are
//! filled in, the others are NULL (the inline wrappers then report `EOPNOTSUPP`).
//!
//! Opening binds nothing: the device's UDP socket and progress thread start with the first
//! verb that needs them ([`SoftContext::runtime`]), so `ibv_devinfo` works while another
//! process uses the address.

use std::mem::offset_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Mutex, OnceLock};

use softrnic_uapi::{Context, OpenOptions, Progress};

use crate::abi::context::{
    ibv_context, ibv_context_ops, ibv_device, verbs_context, VERBS_ABI_IS_EXTENDED,
};
use crate::devices::SoftDevice;
use crate::ffi::set_errno;
use crate::verbs::async_event::AsyncEvents;
use crate::verbs::{cq, cq_ex, dm, mw, odp, parent_domain, post, qp_ex, query, srq, xrc};

/// An open device.
#[repr(C)]
pub(crate) struct SoftContext {
    /// The C part; `vctx.context` is what the application holds.
    pub vctx: verbs_context,
    /// The device it was opened on.
    pub dev: &'static SoftDevice,
    /// This context on the running device (UDP socket, progress thread), which every context
    /// of the device in the process shares: joined (or started) by the first verb that needs
    /// it (`ibv_alloc_pd`), or the errno of starting it.
    runtime: OnceLock<Result<Context, libc::c_int>>,
    /// `async_fd` and the events behind it; the device's start starts its watcher.
    pub events: AsyncEvents,
    /// `cmd_fd`: what names this context to `ibv_import_device` (see `verbs::import`);
    /// closed with the context.
    cmd: OwnedFd,
}

impl SoftContext {
    /// The running device, started on first use.
    ///
    /// # Errors
    /// The errno of binding the device's address (`EADDRINUSE` if another process's device
    /// has it).
    pub fn runtime(&self) -> Result<&Context, libc::c_int> {
        self.runtime
            .get_or_init(|| {
                let opts = OpenOptions {
                    progress: progress_from_env(),
                    // The key seed from the OS: unguessable R_Keys.
                    ..OpenOptions::default()
                };
                let rt = Context::open(self.dev.addr, opts)
                    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
                self.events.watch(&rt, &self.vctx.context);
                Ok(rt)
            })
            .as_ref()
            .map_err(|e| *e)
    }
}

/// The progress mode of the process's devices: a thread per device (the default: RDMA WRITEs
/// land while the program spins on memory, as `ib_write_lat` does), or with
/// `SOFTRNIC_PROGRESS=polling` progress from the program's own `ibv_poll_cq` (no thread
/// competing with a busy poller; what the program needs while it does not poll waits for the
/// idle watchdog, up to a few milliseconds).
fn progress_from_env() -> Progress {
    match std::env::var("SOFTRNIC_PROGRESS").as_deref() {
        Ok("polling") => Progress::Polling,
        _ => Progress::Thread,
    }
}

/// Where the `ibv_context` is inside a [`SoftContext`].
const CONTEXT_OFFSET: usize = offset_of!(SoftContext, vctx) + offset_of!(verbs_context, context);

/// The addresses of the `ibv_context`s open now.
static OPEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn open_list() -> std::sync::MutexGuard<'static, Vec<usize>> {
    OPEN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The ops of `ibv_context_ops` that inline code calls without a NULL check: the CQ, QP,
/// SRQ and memory-window ones; and `_compat_resize_cq`, which rdma-core also fills with the
/// provider's `resize_cq` (its `verbs_set_ops`).
fn context_ops() -> ibv_context_ops {
    ibv_context_ops {
        alloc_mw: Some(mw::op_alloc_mw),
        bind_mw: Some(mw::op_bind_mw),
        dealloc_mw: Some(mw::op_dealloc_mw),
        poll_cq: Some(cq::op_poll_cq),
        req_notify_cq: Some(cq::op_req_notify_cq),
        _compat_resize_cq: Some(cq::op_resize_cq),
        post_srq_recv: Some(srq::op_post_srq_recv),
        post_send: Some(post::op_post_send),
        post_recv: Some(post::op_post_recv),
        ..Default::default()
    }
}

/// A new command fd: a memory file of no size, whose inode no other context shares.
fn new_cmd_fd() -> Result<OwnedFd, libc::c_int> {
    // SAFETY: a NUL-terminated name and valid flags; the fd returned is ours.
    let fd = unsafe { libc::memfd_create(c"softrnic-context".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EMFILE));
    }
    // SAFETY: a fresh fd, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The file `fd` is open on, as `(st_dev, st_ino)`; `None` if `fd` is not open.
pub(crate) fn file_id(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: fstat writes at most a `struct stat` into `st`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: any int may be passed; a bad fd is EBADF.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// The open context whose command fd is open on the same file as `fd` (a `dup` of it, or the
/// fd itself), if any.
pub(crate) fn by_cmd_fd(fd: libc::c_int) -> Option<*mut ibv_context> {
    let id = file_id(fd)?;
    let open = open_list().clone();
    open.into_iter()
        .map(|c| c as *mut ibv_context)
        .find(|c| lookup(*c).is_some_and(|s| file_id(s.cmd.as_raw_fd()) == Some(id)))
}

/// Opens `dev`: a new context with a command fd of its own, registered as open; NULL with
/// `errno` if its `async_fd` or `cmd_fd` cannot be created.
pub(crate) fn open(dev: &'static SoftDevice) -> *mut ibv_context {
    match new_cmd_fd() {
        Ok(cmd) => open_with(dev, cmd, None),
        Err(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
    }
}

/// Opens `dev` with `cmd` as its command fd (a new one, or the one `ibv_import_device` is
/// given, which the context then owns); NULL with `errno` if its `async_fd` cannot be
/// created. An imported context is given the `runtime` of the context it imports: the same
/// softrnic context, so that the objects of either may be used with the other's, as two
/// `ibv_context`s on one kernel command file can (the asynchronous events of that context
/// keep arriving on the first's `async_fd`).
pub(crate) fn open_with(
    dev: &'static SoftDevice,
    cmd: OwnedFd,
    runtime: Option<Context>,
) -> *mut ibv_context {
    let events = match AsyncEvents::new() {
        Ok(e) => e,
        Err(e) => {
            set_errno(e);
            return std::ptr::null_mut();
        }
    };
    let soft = Box::new(SoftContext {
        vctx: verbs_context {
            query_port: Some(query::op_query_port),
            advise_mr: Some(odp::op_advise_mr),
            alloc_null_mr: None,
            read_counters: None,
            attach_counters_point_flow: None,
            create_counters: None,
            destroy_counters: None,
            reg_dm_mr: Some(dm::op_reg_dm_mr),
            alloc_dm: Some(dm::op_alloc_dm),
            free_dm: Some(dm::op_free_dm),
            modify_flow_action_esp: None,
            destroy_flow_action: None,
            create_flow_action_esp: None,
            modify_qp_rate_limit: None,
            alloc_parent_domain: Some(parent_domain::op_alloc_parent_domain),
            dealloc_td: Some(parent_domain::op_dealloc_td),
            alloc_td: Some(parent_domain::op_alloc_td),
            modify_cq: None,
            post_srq_ops: None,
            destroy_rwq_ind_table: None,
            create_rwq_ind_table: None,
            destroy_wq: None,
            modify_wq: None,
            create_wq: None,
            query_rt_values: None,
            create_cq_ex: Some(cq_ex::op_create_cq_ex),
            priv_: std::ptr::null_mut(),
            query_device_ex: Some(query::op_query_device_ex),
            ibv_destroy_flow: None,
            ABI_placeholder2: None,
            ibv_create_flow: None,
            ABI_placeholder1: None,
            open_qp: None,
            create_qp_ex: Some(qp_ex::op_create_qp_ex),
            get_srq_num: Some(xrc::op_get_srq_num),
            create_srq_ex: Some(xrc::op_create_srq_ex),
            open_xrcd: Some(xrc::op_open_xrcd),
            close_xrcd: Some(xrc::op_close_xrcd),
            _ABI_placeholder3: 0,
            sz: size_of::<verbs_context>(),
            context: ibv_context {
                device: (&dev.ibv as *const ibv_device).cast_mut(),
                ops: context_ops(),
                cmd_fd: cmd.as_raw_fd(),
                async_fd: events.fd(),
                num_comp_vectors: 1,
                // SAFETY (zeroed): an all-zero pthread_mutex_t is PTHREAD_MUTEX_INITIALIZER
                // on glibc.
                mutex: unsafe { std::mem::zeroed() },
                abi_compat: VERBS_ABI_IS_EXTENDED,
            },
        },
        dev,
        runtime: runtime.map_or_else(OnceLock::new, |rt| OnceLock::from(Ok(rt))),
        events,
        cmd,
    });
    let raw = Box::into_raw(soft);
    // SAFETY: CONTEXT_OFFSET is the offset of a field of the SoftContext `raw` points to.
    let ctx = unsafe { raw.cast::<u8>().add(CONTEXT_OFFSET) }.cast::<ibv_context>();
    open_list().push(ctx as usize);
    ctx
}

/// The open context at `ctx`, if `ctx` is one (anything else is refused, not read). The
/// reference is valid until `ibv_close_device(ctx)`, which the application must not race with
/// other calls on the context.
pub(crate) fn lookup<'a>(ctx: *const ibv_context) -> Option<&'a SoftContext> {
    if !open_list().contains(&(ctx as usize)) {
        return None;
    }
    // SAFETY: `ctx` was returned by `open` and is not closed, so it is CONTEXT_OFFSET bytes
    // into a live SoftContext.
    Some(unsafe { &*ctx.cast::<u8>().sub(CONTEXT_OFFSET).cast::<SoftContext>() })
}

/// Closes `ctx`; `false` if it is not an open context.
pub(crate) fn close(ctx: *mut ibv_context) -> bool {
    let mut open = open_list();
    let Some(pos) = open.iter().position(|c| *c == ctx as usize) else {
        return false;
    };
    open.swap_remove(pos);
    drop(open);
    // SAFETY: `ctx` was open until just now, and the caller does not race ibv_close_device.
    unsafe { crate::verbs::teardown::destroy_all(ctx) };
    // SAFETY: `ctx` came from `open` (so from Box::into_raw at CONTEXT_OFFSET before it) and
    // was open until just now; removing it from OPEN makes this the only release.
    drop(unsafe { Box::from_raw(ctx.cast::<u8>().sub(CONTEXT_OFFSET).cast::<SoftContext>()) });
    true
}

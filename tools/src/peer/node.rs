//! One side of a two-process scenario: a softrnic device on its own address, on kernel UDP
//! wrapped in a fault injector, with one RC QP, one CQ, memory regions in numbered protection
//! domains, and the verbs a scenario needs. The test process drives its own `Node` directly;
//! the peer process drives one from the commands of [`super::protocol`].

use std::net::IpAddr;
use std::time::Duration;

use softrnic_provider::transport::{FaultControl, FaultInjector};
use softrnic_uapi::{
    Access, AttrMask, ConnectAttr, Context, Cq, MemoryRegion, OpenOptions, Pd, Progress, QpAttr,
    QpCaps, QpInitAttr, QpState, QueuePair, RecvWr, SendWr, Sge, WcOpcode, WcStatus,
    WorkCompletion,
};

/// What a scenario knows of a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrInfo {
    /// Its number in the node.
    pub id: usize,
    /// Its first byte's address.
    pub addr: u64,
    /// L_Key.
    pub lkey: u32,
    /// R_Key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: usize,
}

/// A node's result: errors are text, as they cross the command protocol.
pub type NodeResult<T> = Result<T, String>;

/// The device, its QP and its regions. Field order is drop order (QP before CQ).
pub struct Node {
    qp: QueuePair,
    cq: Cq,
    /// Regions by id; `None` once deregistered. Dropped last to first (see `Drop`), so a
    /// sub-region goes before the region whose memory it covers.
    mrs: Vec<Option<MemoryRegion>>,
    /// PD 0 is the QP's; more are made on demand.
    pds: Vec<Pd>,
    faults: FaultControl,
    ctx: Context,
}

impl Drop for Node {
    fn drop(&mut self) {
        while self.mrs.pop().is_some() {}
    }
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Node {
    /// Opens a device on `addr` (progress thread) and creates the CQ and the RC QP.
    ///
    /// # Errors
    /// The device cannot be opened (address not local, port 4791 taken).
    pub fn open(addr: IpAddr, key_seed: u64) -> std::io::Result<Node> {
        let mut control = None;
        let ctx = Context::open_wrapped(
            addr,
            OpenOptions {
                progress: Progress::Thread,
                key_seed,
            },
            |udp| {
                let (t, c) = FaultInjector::new(udp);
                control = Some(c);
                Box::new(t)
            },
        )?;
        let faults = control.ok_or_else(|| std::io::Error::other("no fault control"))?;
        let pd = ctx.alloc_pd();
        let cq = ctx.create_cq(4096).map_err(std::io::Error::other)?;
        let cap = QpCaps {
            max_send_wr: 256,
            max_recv_wr: 256,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
        };
        let qp = pd
            .create_qp(&QpInitAttr::rc(&cq, cap))
            .map_err(std::io::Error::other)?;
        Ok(Node {
            qp,
            cq,
            mrs: Vec::new(),
            pds: vec![pd],
            faults,
            ctx,
        })
    }

    /// The device's address.
    pub fn addr(&self) -> IpAddr {
        self.ctx.local_addr()
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qp.qp_num()
    }

    /// The fault injector's rules and counters.
    pub fn faults(&self) -> &FaultControl {
        &self.faults
    }

    fn pd(&mut self, pd: u32) -> NodeResult<Pd> {
        if pd > 16 {
            return Err("PD numbers go up to 16".into());
        }
        while self.pds.len() <= pd as usize {
            let p = self.ctx.alloc_pd();
            self.pds.push(p);
        }
        Ok(self.pds[pd as usize].clone())
    }

    fn push(&mut self, mr: MemoryRegion) -> MrInfo {
        let info = MrInfo {
            id: self.mrs.len(),
            addr: mr.addr(),
            lkey: mr.lkey(),
            rkey: mr.rkey(),
            len: mr.len(),
        };
        self.mrs.push(Some(mr));
        info
    }

    fn mr(&self, id: usize) -> NodeResult<&MemoryRegion> {
        self.mrs
            .get(id)
            .and_then(Option::as_ref)
            .ok_or_else(|| format!("no memory region {id}"))
    }

    /// `ibv_reg_mr` of a new zeroed buffer of `len` bytes in PD number `pd`.
    ///
    /// # Errors
    /// As `ibv_reg_mr`.
    pub fn reg_mr(&mut self, len: usize, access: Access, pd: u32) -> NodeResult<MrInfo> {
        let mr = self.pd(pd)?.reg_mr(len, access).map_err(text)?;
        Ok(self.push(mr))
    }

    /// `ibv_reg_mr` of `len` bytes of region `parent`'s memory from `offset`: another key over
    /// memory that stays reachable through `parent`, so a test can see around it.
    ///
    /// # Errors
    /// Outside `parent`; as `ibv_reg_mr`.
    pub fn reg_sub_mr(
        &mut self,
        parent: usize,
        offset: usize,
        len: usize,
        access: Access,
        pd: u32,
    ) -> NodeResult<MrInfo> {
        let p = self.mr(parent)?;
        if offset.checked_add(len).is_none_or(|end| end > p.len()) {
            return Err("the sub-region leaves its parent".into());
        }
        let addr = (p.addr() + offset as u64) as *mut u8;
        let pd = self.pd(pd)?;
        // SAFETY: inside `parent`'s buffer, which the node drops after this region (regions
        // drop last to first) and which `dereg` of the parent is the caller's to avoid first.
        let mr = unsafe { pd.reg_mr_raw(addr, len, access) }.map_err(text)?;
        Ok(self.push(mr))
    }

    /// `ibv_dereg_mr`.
    ///
    /// # Errors
    /// No such region; as `ibv_dereg_mr`.
    pub fn dereg(&mut self, id: usize) -> NodeResult<()> {
        let mr = self
            .mrs
            .get_mut(id)
            .and_then(Option::take)
            .ok_or_else(|| format!("no memory region {id}"))?;
        mr.dereg().map_err(|(_, e)| text(e))
    }

    /// Copies `data` into region `id` at `offset`.
    ///
    /// # Errors
    /// Outside the region, or a region without LOCAL_WRITE.
    pub fn fill(&self, id: usize, offset: usize, data: &[u8]) -> NodeResult<()> {
        self.mr(id)?.write(offset, data).map_err(text)
    }

    /// Reads `len` bytes of region `id` at `offset`.
    ///
    /// # Errors
    /// Outside the region.
    pub fn read(&self, id: usize, offset: usize, len: usize) -> NodeResult<Vec<u8>> {
        let mut v = vec![0; len];
        self.mr(id)?.read(offset, &mut v).map_err(text)?;
        Ok(v)
    }

    /// An SGE of `len` bytes at `offset` of region `id` (not checked: the NIC checks).
    ///
    /// # Errors
    /// No such region.
    pub fn sge(&self, id: usize, offset: usize, len: u32) -> NodeResult<Sge> {
        Ok(self.mr(id)?.sge(offset, len))
    }

    /// Connects the QP (RESET→INIT→RTR→RTS).
    ///
    /// # Errors
    /// As `ibv_modify_qp`.
    pub fn connect(&self, attr: &ConnectAttr) -> NodeResult<()> {
        self.qp.connect(attr).map_err(text)
    }

    /// `ibv_modify_qp` of the state, and of `qp_access_flags` if given.
    ///
    /// # Errors
    /// As `ibv_modify_qp`.
    pub fn modify(&self, state: QpState, access: Option<Access>) -> NodeResult<()> {
        let mut mask = AttrMask::STATE;
        let mut attr = QpAttr {
            qp_state: state,
            ..QpAttr::default()
        };
        if let Some(a) = access {
            attr.qp_access_flags = a;
            mask |= AttrMask::ACCESS_FLAGS;
        }
        self.qp.modify(&attr, mask).map_err(text)
    }

    /// The QP's state.
    pub fn state(&self) -> QpState {
        self.qp.state()
    }

    /// `ibv_post_recv` of one WR.
    ///
    /// # Errors
    /// As `ibv_post_recv`.
    pub fn post_recv(&self, wr_id: u64, sg_list: Vec<Sge>) -> NodeResult<()> {
        self.qp
            .post_recv(&[RecvWr { wr_id, sg_list }])
            .map_err(|(_, e)| text(e))
    }

    /// `ibv_post_send` of one WR.
    ///
    /// # Errors
    /// As `ibv_post_send`.
    pub fn post_send(&self, wr: &SendWr) -> NodeResult<()> {
        self.qp
            .post_send(std::slice::from_ref(wr))
            .map_err(|(_, e)| text(e))
    }

    /// Waits until `n` completions have arrived or `timeout` passes; returns those that did.
    pub fn poll(&self, n: usize, timeout: Duration) -> Vec<WorkCompletion> {
        let deadline = std::time::Instant::now() + timeout;
        let mut got = Vec::new();
        let mut buf = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 16];
        loop {
            let want = n.saturating_sub(got.len()).clamp(1, 16);
            let k = self.cq.poll(&mut buf[..want]).unwrap_or(0);
            got.extend_from_slice(&buf[..k]);
            if got.len() >= n || std::time::Instant::now() >= deadline {
                return got;
            }
            if k == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}

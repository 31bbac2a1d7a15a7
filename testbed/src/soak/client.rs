//! The soak's client: works through every QP's [`Plan`] for a while, [`WINDOW`] steps in
//! flight per QP, checks what comes back, and accounts for every work request.
//!
//! Each step has a slot of local memory: a source half (what a SEND or WRITE sends) and a
//! destination half (where a READ or an atomic returns), and the server's area of the same
//! QP and slot as its remote target. A step's work requests are all signaled; the step is
//! checked when the last of them completes, and the slot takes the plan's next step.

use std::collections::HashSet;
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use softrnic_uapi::{
    Access, ConnectAttr, Context, MemoryRegion, OpenOptions, QueuePair, RemoteAddr, SendFlags,
    SendOpcode, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

use super::{
    area, create_qps, fill, imm, word, Control, Plan, Step, CONTROL_PORT, MAX_LEN, QPS, WINDOW,
};

/// The bound on a wait for what must come, never a timing assertion.
const HANG: Duration = Duration::from_secs(120);

/// What the client did.
#[derive(Debug, Default)]
pub struct Done {
    /// Work requests completed (each exactly once, successfully).
    pub wrs: u64,
    /// Steps completed and checked.
    pub steps: u64,
    /// Bytes moved: sent, written, read, and 8 per atomic.
    pub bytes: u64,
    /// Work requests per opcode, in [`SendOpcode`] order up to FETCH_ADD.
    pub by_opcode: [u64; 7],
}

/// A step in flight in a slot.
struct InFlight {
    num: u64,
    step: Step,
    /// Its work requests not yet completed.
    pending: usize,
    /// An atomic's expected original value.
    original: u64,
}

/// The client's QPs, memory and bookkeeping.
struct Client {
    qps: Vec<QueuePair>,
    mem: MemoryRegion,
    remote: (u64, u32),
    plans: Vec<Plan>,
    slots: Vec<Option<InFlight>>,
    /// The value each QP's atomic word will have once its posted atomics are done.
    model: [u64; QPS],
    /// Every posted work request not yet completed.
    outstanding: HashSet<u64>,
    serial: u64,
    /// Receiving steps posted per QP.
    receiving: [u64; QPS],
    done: Done,
}

/// Runs against the server at `server` from `addr` for `secs` seconds, then drains; `Err`
/// says what was wrong.
pub fn drive(addr: IpAddr, server: IpAddr, secs: u64) -> Result<Done, String> {
    let stream = connect_control(server)?;
    let mut control = Control::new(stream).map_err(|e| e.to_string())?;
    let ctx = Context::open(addr, OpenOptions::default()).map_err(|e| format!("open: {e}"))?;
    let pd = ctx.alloc_pd();
    let cq = ctx
        .create_cq(QPS * WINDOW * 2 + 64)
        .map_err(|e| format!("{e:?}"))?;
    let qps = create_qps(&pd, &cq, 2 * WINDOW, 1)?;
    let mem = pd
        .reg_mr(QPS * WINDOW * 2 * MAX_LEN, Access::LOCAL_WRITE)
        .map_err(|e| format!("{e:?}"))?;

    let hello = control
        .numbers()
        .map_err(|e| format!("server's hello: {e}"))?;
    if hello.len() != QPS + 2 {
        return Err(format!("the server sent {hello:?}"));
    }
    let ours: Vec<String> = qps.iter().map(|q| q.qp_num().to_string()).collect();
    control.send(&ours.join(" ")).map_err(|e| e.to_string())?;
    for (i, qp) in qps.iter().enumerate() {
        qp.connect(&ConnectAttr {
            dest: server,
            dest_qp_num: hello[i] as u32,
            ..ConnectAttr::default()
        })
        .map_err(|e| format!("connect: {e:?}"))?;
    }
    if control.recv().map_err(|e| e.to_string())? != "ready" {
        return Err("the server is not ready".into());
    }

    let mut c = Client {
        qps,
        mem,
        remote: (hello[QPS], hello[QPS + 1] as u32),
        plans: (0..QPS).map(Plan::new).collect(),
        slots: (0..QPS * WINDOW).map(|_| None).collect(),
        model: [0; QPS],
        outstanding: HashSet::new(),
        serial: 0,
        receiving: [0; QPS],
        done: Done::default(),
    };
    for slot in 0..QPS * WINDOW {
        c.post(slot)?;
    }
    let end = Instant::now() + Duration::from_secs(secs);
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 32];
    let mut last = Instant::now();
    while !c.outstanding.is_empty() {
        let n = cq.poll(&mut wcs).map_err(|e| format!("poll: {e:?}"))?;
        if n == 0 {
            if last.elapsed() > HANG {
                return Err(format!(
                    "no completion for {HANG:?}, {} work requests outstanding",
                    c.outstanding.len()
                ));
            }
            continue;
        }
        last = Instant::now();
        let more = Instant::now() < end;
        for wc in &wcs[..n] {
            c.complete(wc, more)?;
        }
    }
    c.check_words(&cq)?;

    let counts: Vec<String> = c.receiving.iter().map(u64::to_string).collect();
    control.send(&counts.join(" ")).map_err(|e| e.to_string())?;
    let reply = control.recv().map_err(|e| format!("server's reply: {e}"))?;
    if !reply.starts_with("ok ") {
        return Err(format!("the server: {reply}"));
    }
    eprintln!("soak-node client: the server says {reply} (messages, bytes received)");
    Ok(c.done)
}

/// The control connection, once the server listens (it starts first, but may not be there
/// yet).
fn connect_control(server: IpAddr) -> Result<TcpStream, String> {
    let guard = Instant::now() + HANG;
    loop {
        match TcpStream::connect((server, CONTROL_PORT)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > guard => return Err(format!("control: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

impl Client {
    /// Where slot `slot`'s source half starts in the local region; its destination half
    /// follows.
    fn src(slot: usize) -> usize {
        slot * 2 * MAX_LEN
    }

    fn dst(slot: usize) -> usize {
        Self::src(slot) + MAX_LEN
    }

    /// Posts the next step of the slot's QP in slot `slot` (of all QPs' slots).
    fn post(&mut self, slot: usize) -> Result<(), String> {
        let qp = slot / WINDOW;
        let (num, step) = self.plans[qp].step();
        let (src, dst) = (Self::src(slot), Self::dst(slot));
        let target = |offset: usize| RemoteAddr {
            addr: self.remote.0 + offset as u64,
            rkey: self.remote.1,
        };
        let mut scratch = vec![0u8; MAX_LEN];
        let mut original = 0;
        let mut wr = |op, sge, remote| {
            self.serial += 1;
            SendWr {
                flags: SendFlags::SIGNALED,
                remote,
                imm_data_or_inv_rkey: imm(num),
                ..SendWr::new(
                    self.serial * (QPS * WINDOW) as u64 + slot as u64,
                    op,
                    vec![sge],
                )
            }
        };
        let here = area(qp, slot % WINDOW);
        let wrs = match step {
            Step::Send { len } | Step::SendImm { len } => {
                fill(&mut scratch[..len], qp, num);
                self.mem.write(src, &scratch[..len]).expect("in the region");
                let op = if matches!(step, Step::Send { .. }) {
                    SendOpcode::Send
                } else {
                    SendOpcode::SendWithImm
                };
                self.receiving[qp] += 1;
                vec![wr(op, self.mem.sge(src, len as u32), RemoteAddr::default())]
            }
            Step::WriteImm { len } | Step::WriteRead { len } => {
                fill(&mut scratch[..len], qp, num);
                self.mem.write(src, &scratch[..len]).expect("in the region");
                // What the READ must overwrite: every byte differs from the payload.
                scratch[..len].iter_mut().for_each(|b| *b = !*b);
                self.mem.write(dst, &scratch[..len]).expect("in the region");
                let op = if matches!(step, Step::WriteImm { .. }) {
                    self.receiving[qp] += 1;
                    SendOpcode::RdmaWriteWithImm
                } else {
                    SendOpcode::RdmaWrite
                };
                vec![
                    wr(op, self.mem.sge(src, len as u32), target(here)),
                    wr(
                        SendOpcode::RdmaRead,
                        self.mem.sge(dst, len as u32),
                        target(here),
                    ),
                ]
            }
            Step::CmpSwap { .. } | Step::FetchAdd { .. } => {
                // The word the model expects back, then what the atomic makes of it.
                original = self.model[qp];
                let (op, compare_add, swap) = match step {
                    Step::CmpSwap { hit, swap } => {
                        let compare = if hit { original } else { !original };
                        (SendOpcode::AtomicCmpAndSwp, compare, swap)
                    }
                    Step::FetchAdd { add } => (SendOpcode::AtomicFetchAndAdd, add, 0),
                    _ => unreachable!("an atomic step"),
                };
                self.model[qp] = match step {
                    Step::CmpSwap { hit: true, swap } => swap,
                    Step::CmpSwap { hit: false, .. } => original,
                    _ => original.wrapping_add(compare_add),
                };
                self.mem
                    .write(dst, &(!original).to_ne_bytes())
                    .expect("in the region");
                let mut w = wr(op, self.mem.sge(dst, 8), target(word(qp)));
                (w.compare_add, w.swap) = (compare_add, swap);
                vec![w]
            }
        };
        self.qps[qp]
            .post_send(&wrs)
            .map_err(|(i, e)| format!("QP {qp}: post_send of {:?}: {e:?}", wrs[i]))?;
        for w in &wrs {
            self.outstanding.insert(w.wr_id);
            self.done.by_opcode[w.opcode as usize] += 1;
        }
        self.slots[slot] = Some(InFlight {
            num,
            step,
            pending: wrs.len(),
            original,
        });
        Ok(())
    }

    /// Takes completion `wc`: accounts for it, checks its step once the step's last work
    /// request is done, and posts the slot's next step if `more`.
    fn complete(&mut self, wc: &WorkCompletion, more: bool) -> Result<(), String> {
        if wc.status != WcStatus::Success {
            return Err(format!("an error completion: {wc:?}"));
        }
        if !self.outstanding.remove(&wc.wr_id) {
            return Err(format!(
                "a completion of no outstanding work request: {wc:?}"
            ));
        }
        self.done.wrs += 1;
        let slot = (wc.wr_id % (QPS * WINDOW) as u64) as usize;
        let flight = self.slots[slot]
            .as_mut()
            .expect("a slot with a WR outstanding");
        flight.pending -= 1;
        if flight.pending > 0 {
            return Ok(());
        }
        let flight = self.slots[slot].take().expect("just seen");
        let qp = slot / WINDOW;
        let what = format!("QP {qp} step {} ({:?})", flight.num, flight.step);
        match flight.step {
            Step::Send { len } | Step::SendImm { len } => self.done.bytes += len as u64,
            Step::WriteImm { len } | Step::WriteRead { len } => {
                let (mut got, mut want) = (vec![0u8; len], vec![0u8; len]);
                self.mem
                    .read(Self::dst(slot), &mut got)
                    .expect("in the region");
                fill(&mut want, qp, flight.num);
                if got != want {
                    let at = got.iter().zip(&want).position(|(g, w)| g != w).unwrap_or(0);
                    return Err(format!(
                        "{what}: the READ back differs from the WRITE at byte {at} of {len}"
                    ));
                }
                self.done.bytes += 2 * len as u64;
            }
            Step::CmpSwap { .. } | Step::FetchAdd { .. } => {
                let got = self.word_at(Self::dst(slot));
                if got != flight.original {
                    return Err(format!(
                        "{what}: the original value {got:#x}, the model says {:#x}",
                        flight.original
                    ));
                }
                self.done.bytes += 8;
            }
        }
        self.done.steps += 1;
        if more {
            self.post(slot)?;
        }
        Ok(())
    }

    fn word_at(&self, offset: usize) -> u64 {
        let mut b = [0u8; 8];
        self.mem.read(offset, &mut b).expect("in the region");
        u64::from_ne_bytes(b)
    }

    /// READs each QP's atomic word and compares it with the model.
    fn check_words(&mut self, cq: &softrnic_uapi::Cq) -> Result<(), String> {
        for (qp, queue) in self.qps.iter().enumerate() {
            let at = Self::dst(qp * WINDOW);
            let w = SendWr {
                flags: SendFlags::SIGNALED,
                remote: RemoteAddr {
                    addr: self.remote.0 + word(qp) as u64,
                    rkey: self.remote.1,
                },
                ..SendWr::new(qp as u64, SendOpcode::RdmaRead, vec![self.mem.sge(at, 8)])
            };
            queue.post_send(&[w]).map_err(|(_, e)| format!("{e:?}"))?;
        }
        let wcs = cq
            .wait(QPS, HANG)
            .map_err(|e| format!("the words' READs: {e:?}"))?;
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                return Err(format!("an error completion: {wc:?}"));
            }
            let qp = wc.wr_id as usize;
            let got = self.word_at(Self::dst(qp * WINDOW));
            if got != self.model[qp] {
                return Err(format!(
                    "QP {qp}'s atomic word is {got:#x}, the model says {:#x}",
                    self.model[qp]
                ));
            }
        }
        self.done.wrs += QPS as u64;
        self.done.by_opcode[SendOpcode::RdmaRead as usize] += QPS as u64;
        Ok(())
    }
}

//! The soak's server: the target of the client's operations, and the checker of its SENDs.
//!
//! Its receive queues hold [`RECV_DEPTH`] buffers of [`MAX_LEN`] per QP; each receive
//! completion is checked against the next receiving step of the QP's [`Plan`] (opcode,
//! immediate data, length, and for a SEND every byte) and its buffer posted again. At the
//! end the client says how many receiving steps each QP completed, and the server must have
//! counted the same.

use std::net::{IpAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use softrnic_uapi::{
    Access, ConnectAttr, Context, OpenOptions, RecvWr, WcFlags, WcOpcode, WcStatus, WorkCompletion,
};

use super::{
    create_qps, fill, imm, Control, Plan, Step, CONTROL_PORT, MAX_LEN, QPS, RECV_DEPTH, SERVER_LEN,
};

/// The bound on a wait for what must come, never a timing assertion.
const HANG: Duration = Duration::from_secs(120);

/// What the server received.
#[derive(Debug, Default)]
pub struct Received {
    /// Messages (SENDs, SEND_WITH_IMMs, WRITE_WITH_IMMs).
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Serves one client on `addr` until it says it is done; `Err` says what was wrong.
pub fn serve(addr: IpAddr) -> Result<Received, String> {
    let listener = TcpListener::bind((addr, CONTROL_PORT)).map_err(|e| format!("bind: {e}"))?;
    let ctx = Context::open(addr, OpenOptions::default()).map_err(|e| format!("open: {e}"))?;
    let pd = ctx.alloc_pd();
    let cq = ctx
        .create_cq(QPS * RECV_DEPTH + 64)
        .map_err(|e| format!("{e:?}"))?;
    let qps = create_qps(&pd, &cq, 4, RECV_DEPTH)?;
    let rights =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let target = pd
        .reg_mr(SERVER_LEN, rights)
        .map_err(|e| format!("{e:?}"))?;
    let bufs = pd
        .reg_mr(QPS * RECV_DEPTH * MAX_LEN, Access::LOCAL_WRITE)
        .map_err(|e| format!("{e:?}"))?;

    let (stream, peer) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    let mut control = Control::new(stream).map_err(|e| e.to_string())?;
    let mut hello: Vec<String> = qps.iter().map(|q| q.qp_num().to_string()).collect();
    hello.push(target.addr().to_string());
    hello.push(target.rkey().to_string());
    control.send(&hello.join(" ")).map_err(|e| e.to_string())?;
    let theirs = control
        .numbers()
        .map_err(|e| format!("client's QPNs: {e}"))?;
    if theirs.len() != QPS {
        return Err(format!("the client sent {} QPNs", theirs.len()));
    }
    let recv = |qp: usize, buf: usize| RecvWr {
        wr_id: (qp * RECV_DEPTH + buf) as u64,
        sg_list: vec![bufs.sge((qp * RECV_DEPTH + buf) * MAX_LEN, MAX_LEN as u32)],
    };
    for (i, qp) in qps.iter().enumerate() {
        qp.connect(&ConnectAttr {
            dest: peer.ip(),
            dest_qp_num: theirs[i] as u32,
            ..ConnectAttr::default()
        })
        .map_err(|e| format!("connect: {e:?}"))?;
        let wrs: Vec<RecvWr> = (0..RECV_DEPTH).map(|b| recv(i, b)).collect();
        qp.post_recv(&wrs)
            .map_err(|e| format!("post_recv: {e:?}"))?;
    }
    control.send("ready").map_err(|e| e.to_string())?;

    // The client's last line comes while the CQ is polled: a thread waits for it.
    let (done_tx, done_rx) = mpsc::channel();
    let mut reader = Control::new(control.stream().try_clone().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    std::thread::spawn(move || done_tx.send(reader.numbers()));

    let qp_index = |num: u32| qps.iter().position(|q| q.qp_num() == num);
    let mut plans: Vec<Plan> = (0..QPS).map(Plan::new).collect();
    let mut counts = [0u64; QPS];
    let mut got = Received::default();
    let mut expected: Option<Vec<u64>> = None;
    let mut wcs = [WorkCompletion::error(0, WcStatus::Success, WcOpcode::Send, 0); 32];
    let (mut payload, mut want) = (vec![0u8; MAX_LEN], vec![0u8; MAX_LEN]);
    let mut last = Instant::now();
    let outcome = loop {
        if expected.as_deref() == Some(&counts[..]) {
            break Ok(());
        }
        if expected.is_none() {
            match done_rx.try_recv() {
                Ok(Ok(c)) if c.len() == QPS => expected = Some(c),
                Ok(Ok(c)) => break Err(format!("the client's counts: {c:?}")),
                Ok(Err(e)) => break Err(format!("control connection: {e}")),
                Err(_) => {}
            }
        }
        let n = cq.poll(&mut wcs).map_err(|e| format!("poll: {e:?}"))?;
        if n == 0 {
            if last.elapsed() > HANG {
                break Err(format!(
                    "no completion for {HANG:?}; received per QP {counts:?}, expected {expected:?}"
                ));
            }
            continue;
        }
        last = Instant::now();
        let mut failed = None;
        for wc in &wcs[..n] {
            let Some(q) = qp_index(wc.qp_num) else {
                failed = Some(format!("a completion of an unknown QP: {wc:?}"));
                break;
            };
            let (num, step) = loop {
                let (num, step) = plans[q].step();
                if step.receives() {
                    break (num, step);
                }
            };
            let at = wc.wr_id as usize * MAX_LEN;
            if let Err(e) = check(wc, num, step, |len| {
                bufs.read(at, &mut payload[..len]).expect("in the region");
                fill(&mut want[..len], q, num);
                payload[..len] == want[..len]
            }) {
                failed = Some(format!("QP {q} step {num} ({step:?}): {e}; {wc:?}"));
                break;
            }
            counts[q] += 1;
            got.messages += 1;
            got.bytes += u64::from(wc.byte_len);
            let buf = wc.wr_id as usize % RECV_DEPTH;
            if let Err((_, e)) = qps[q].post_recv(&[recv(q, buf)]) {
                failed = Some(format!("post_recv: {e:?}"));
                break;
            }
        }
        if let Some(f) = failed {
            break Err(f);
        }
    };
    let reply = match &outcome {
        Ok(()) => format!("ok {} {}", got.messages, got.bytes),
        Err(e) => format!("fail {e}"),
    };
    let _ = control.send(&reply);
    outcome.map(|()| got)
}

/// Checks receive completion `wc` against step `num`, `step`; `payload_ok(len)` compares
/// the first `len` bytes of its buffer with the step's payload.
fn check(
    wc: &WorkCompletion,
    num: u64,
    step: Step,
    payload_ok: impl FnOnce(usize) -> bool,
) -> Result<(), String> {
    if wc.status != WcStatus::Success {
        return Err(format!("status {:?}", wc.status));
    }
    let (opcode, with_imm, len) = match step {
        Step::Send { len } => (WcOpcode::Recv, false, len),
        Step::SendImm { len } => (WcOpcode::Recv, true, len),
        Step::WriteImm { len } => (WcOpcode::RecvRdmaWithImm, true, len),
        _ => unreachable!("only receiving steps"),
    };
    if wc.opcode != opcode {
        return Err(format!("opcode {:?}, not {opcode:?}", wc.opcode));
    }
    if wc.wc_flags.contains(WcFlags::WITH_IMM) != with_imm {
        return Err(format!("WITH_IMM should be {with_imm}"));
    }
    if with_imm && wc.imm_data_or_inv_rkey != imm(num) {
        return Err(format!("immediate data, not {:#x}", imm(num)));
    }
    if wc.byte_len as usize != len {
        return Err(format!("byte_len {}, not {len}", wc.byte_len));
    }
    if opcode == WcOpcode::Recv && !payload_ok(len) {
        return Err("the payload differs from what was sent".into());
    }
    Ok(())
}

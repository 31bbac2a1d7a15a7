//! Isolation between processes sharing a device: an rkey another process on the same
//! address handed out, used against this process's QP, gets a remote access error
//! (`IBV_WC_REM_ACCESS_ERR`), as an rkey of another host would. Three `softrnic perf-pair`
//! processes: targets A and B share 127.0.46.1 (each its own QPN block, MR and keys), and a
//! writer on 127.0.46.2 is connected to A's QP but given B's rkey and address. A control run
//! first writes with A's own key, which must succeed.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const SHARED: &str = "127.0.46.1";
const WRITER: &str = "127.0.46.2";

struct Proc {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Proc {
    fn start(role: &str, bind: &str) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_softrnic"))
            .args(["perf-pair", role, "--bind", bind, "--secs", "0.05"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start softrnic perf-pair");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Proc {
            child,
            input,
            output,
        }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.output.read_line(&mut l).unwrap();
        l
    }

    fn say(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).unwrap();
        self.input.flush().unwrap();
    }

    /// Ends its input and waits: whether it exited 0, and its standard error.
    fn end(self) -> (bool, String) {
        drop(self.input);
        let out = self.child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// A connection line (`lid:qpn:psn:gid:rkey:addr`) with the rkey and address of `keys`.
fn with_keys_of(line: &str, keys: &str) -> String {
    let mut f: Vec<&str> = line.trim().split(':').collect();
    let k: Vec<&str> = keys.trim().split(':').collect();
    assert_eq!((f.len(), k.len()), (6, 6), "{line:?} {keys:?}");
    f[4] = k[4];
    f[5] = k[5];
    f.join(":") + "\n"
}

/// Target A on the shared address, connected to a writer that writes with the keys of
/// `keys_from` (None: A's own); the writer's success and standard error.
fn write_to_a(keys_from: Option<&str>) -> (bool, String) {
    let mut a = Proc::start("target", SHARED);
    let mut w = Proc::start("writer", WRITER);
    let (al, wl) = (a.line(), w.line());
    a.say(&wl);
    w.say(&with_keys_of(&al, keys_from.unwrap_or(&al)));
    assert_eq!(a.line().trim(), "ready");
    assert_eq!(w.line().trim(), "ready");
    w.say("go\n");
    let result = w.end();
    let (a_ok, a_err) = a.end();
    assert!(a_ok, "target A failed: {a_err}");
    result
}

#[test]
fn another_processs_rkey_gets_a_remote_access_error() {
    let (ok, err) = write_to_a(None);
    assert!(ok, "the control, with A's own key, failed: {err}");

    // B: another process on the same address, with its own MR (connected to itself).
    let mut b = Proc::start("target", SHARED);
    let bl = b.line();
    b.say(&bl);
    assert_eq!(b.line().trim(), "ready");
    let (ok, err) = write_to_a(Some(&bl));
    assert!(!ok, "a WRITE with B's rkey through A's QP succeeded");
    assert!(err.contains("RemAccessErr"), "{err}");
    let (b_ok, b_err) = b.end();
    assert!(b_ok, "B failed: {b_err}");
}

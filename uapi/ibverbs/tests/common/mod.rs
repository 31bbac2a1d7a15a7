//! Shared by the tests that run unmodified rdma-core programs on softrnic: a directory holding
//! the freshly built library as `libibverbs.so.1` (with softrnic's `librdmacm.so.1`,
//! `uapi/rdmacm`, and the vendor stand-ins perftest loads as `libmlx5.so.1` and `libefa.so.1`,
//! see `standins/README.md`), running a program with it, and an rdma-core pingpong between two
//! processes.

#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

// Not every test binary that includes this module uses all three.
#[allow(unused_imports)]
pub use softrnic_testkit::dropin::{built_library, built_rdmacm, lib_dir};

/// `/usr/bin/<name>` if installed, or `None`, the test `test` skipping
/// (`softrnic_testkit::skip`).
pub fn program(name: &str, test: &str) -> Option<PathBuf> {
    program_of(name, test, "ibverbs-utils perftest")
}

/// [`program`] of the Debian packages `packages`, which the skip message names.
pub fn program_of(name: &str, test: &str, packages: &str) -> Option<PathBuf> {
    let p = Path::new("/usr/bin").join(name);
    if p.exists() {
        Some(p)
    } else {
        let reason = format!("{} not installed (apt-get install {packages})", p.display());
        softrnic_testkit::skip(test, &reason);
        None
    }
}

/// Runs `prog args` on softrnic's library, with `SOFTRNIC_ADDR` set to `addr` or unset.
pub fn run(prog: &Path, args: &[&str], addr: Option<&str>) -> Output {
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("SOFTRNIC_ADDR");
    if let Some(a) = addr {
        cmd.env("SOFTRNIC_ADDR", a);
    }
    cmd.output().expect("running the program")
}

/// Stdout and stderr as text.
pub fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Compiles the C program `source` against the installed `<infiniband/verbs.h>` and links it
/// with the built library (so it imports our versioned symbols, as programs linked against
/// rdma-core do); `None`, the test `test` skipping (`softrnic_testkit::skip`), without cc or
/// headers.
/// Programs may `#include "softrnic_test.h"` (`tests/c/`: CHECK and REQUIRE, opening the only
/// device, a PD with a registered buffer, QP state changes, `connect_to_self`, `poll_one`,
/// teardown).
pub fn compile_c(name: &str, source: &str, test: &str) -> Option<PathBuf> {
    compile_c_with(
        name,
        source,
        test,
        ("infiniband/verbs.h", "libibverbs-dev"),
        &[built_library()],
    )
}

/// [`compile_c`] for a program of another header, `header` = (its path under `/usr/include`,
/// the Debian package that installs it), linked with `libraries` (built ones: the program then
/// imports their versioned symbols).
pub fn compile_c_with(
    name: &str,
    source: &str,
    test: &str,
    header: (&str, &str),
    libraries: &[PathBuf],
) -> Option<PathBuf> {
    compile_c_linked(name, source, test, header, libraries, &[])
}

/// [`compile_c_with`], with `link_args` after the libraries on cc's command line (e.g.
/// `-lrpma`, an installed library of the header's package).
pub fn compile_c_linked(
    name: &str,
    source: &str,
    test: &str,
    header: (&str, &str),
    libraries: &[PathBuf],
    link_args: &[&str],
) -> Option<PathBuf> {
    let (header, package) = header;
    if !Path::new("/usr/include").join(header).exists() {
        softrnic_testkit::skip(test, &format!("no <{header}> (apt-get install {package})"));
        return None;
    }
    let dir = lib_dir();
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&src, source).expect("writing the C source");
    let out = match Command::new("cc")
        .arg("-I")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c"))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .args(libraries)
        .args(link_args)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            softrnic_testkit::skip(test, &format!("cannot run cc: {e}"));
            return None;
        }
    };
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(exe)
}

/// A TCP port free right now on every address (for a server/client pair's setup exchange;
/// the servers listen on all addresses), below the kernel's ephemeral range: a port the
/// kernel chose (bind to 0) is one it also gives connecting sockets as their source, and a
/// client of a pair running at the same time took one such port before its server could
/// listen on it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const LOWEST: u16 = 10_000;
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let span = ephemeral.saturating_sub(LOWEST).max(1);
    // Each test process starts elsewhere in the span, and never offers one port twice.
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let start = (std::process::id() % u32::from(span)) as u16;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = LOWEST + (start.wrapping_add(n.wrapping_mul(7)) % span);
        if TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    panic!("no free TCP port below {ephemeral}");
}

/// Starts `prog` on softrnic (our library, device of `addr`), its output captured.
pub fn spawn(prog: &Path, args: &[String], addr: &str) -> Child {
    spawn_env(prog, args, addr, &[])
}

/// [`spawn`] with more environment variables.
pub fn spawn_env(prog: &Path, args: &[String], addr: &str, env: &[(&str, &str)]) -> Child {
    Command::new(prog)
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("SOFTRNIC_ADDR", addr)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", prog.display()))
}

/// `prog` on the device of `addr`, its standard output line by line into `log` (`stdbuf`
/// execs the program: the child's pid is the program's).
pub fn spawn_logged(prog: &Path, args: &[String], addr: &str, log: &Path) -> Child {
    Command::new("stdbuf")
        .arg("-oL")
        .arg(prog)
        .args(args)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("SOFTRNIC_ADDR", addr)
        .stdout(std::fs::File::create(log).expect("creating the log"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", prog.display()))
}

/// Waits for `child` until `deadline`, killing it then (so a hang fails the test); its output
/// is read from now on ([`Drained`]).
pub fn finish(child: Child, deadline: Instant) -> Output {
    Drained::new(child).finish(deadline)
}

/// A child whose piped output is read as it comes: a program that prints more than a pipe
/// holds (perftest prints two lines per QP) would otherwise block on its write, and its peer
/// waiting for it, until the deadline.
pub struct Drained {
    child: Child,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl Drained {
    /// Starts reading `child`'s piped standard output and error.
    pub fn new(mut child: Child) -> Drained {
        fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut bytes);
                }
                bytes
            })
        }
        let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
        Drained {
            child,
            stdout,
            stderr,
        }
    }

    /// Stops the child now.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits for the child until `deadline`, killing it then; its status and all it printed.
    pub fn finish(mut self, deadline: Instant) -> Output {
        while self.child.try_wait().expect("waiting").is_none() {
            if Instant::now() > deadline {
                self.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Output {
            status: self.child.wait().expect("waiting"),
            stdout: self.stdout.join().expect("reading stdout"),
            stderr: self.stderr.join().expect("reading stderr"),
        }
    }
}

/// What the rdma-core pingpongs and perftest say when their client ran before the server
/// listened: on the TCP exchange, and through rdma_cm (`-R`: the setup connection's REQ
/// rejected, reason 8).
const NOT_LISTENING: &[&str] = &["Couldn't connect", "Unable to perform rdma_client function"];

/// Runs `prog args -p PORT` as server on the device of `server`, then `prog args -p PORT
/// server` as client on that of `client` (retried while the server is not listening yet),
/// with a free TCP port and `env`; both within 90 s (perftest's longest runs take half of
/// it on a loaded 2-core machine); the server is stopped if the client failed. Their
/// outputs, server's first.
pub fn run_pair(
    prog: &Path,
    server: &str,
    client: &str,
    args: &[String],
    env: &[(&str, &str)],
) -> (Output, Output) {
    let port = free_port().to_string();
    let mut args = args.to_vec();
    args.extend(["-p".to_string(), port]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let server_child = Drained::new(spawn_env(prog, &args, server, env));
    let mut client_args = args.clone();
    client_args.push(server.into());
    let client_out = loop {
        std::thread::sleep(Duration::from_millis(100));
        let out = finish(spawn_env(prog, &client_args, client, env), deadline);
        let (stdout, stderr) = texts(&out);
        let too_early = NOT_LISTENING
            .iter()
            .any(|s| stdout.contains(s) || stderr.contains(s));
        if out.status.success() || !too_early || Instant::now() > deadline {
            break out;
        }
    };
    let mut server_child = server_child;
    if !client_out.status.success() {
        // Its peer gone, the server would wait for the deadline.
        server_child.kill();
    }
    (server_child.finish(deadline), client_out)
}

/// The result row of a perftest tool's output `out` (the line after the table header that
/// contains `header`): asserts that the process exited 0 and that the row is four or more
/// numbers; `who` names the process in the failure.
pub fn perftest_row(who: &str, out: &Output, header: &str) -> String {
    let (stdout, stderr) = texts(out);
    assert!(
        out.status.success(),
        "{who} failed ({}):\n{stdout}{stderr}",
        out.status
    );
    let mut lines = stdout.lines().skip_while(|l| !l.contains(header));
    assert!(
        lines.next().is_some(),
        "{who}: no result table:\n{stdout}{stderr}"
    );
    let row = lines.next().unwrap_or("").trim().to_string();
    assert!(
        row.split_whitespace().count() >= 4
            && row.split_whitespace().all(|f| f.parse::<f64>().is_ok()),
        "{who}: no result row:\n{stdout}{stderr}"
    );
    row
}

/// Runs an rdma-core pingpong (`ibv_rc_pingpong`, `ibv_srq_pingpong`, ...) as server on the
/// device of `server` and client on that of `client`, `-g 1` over a free TCP port, with
/// `extra` arguments (the client retries while the server is not listening yet): both must
/// exit 0 within 90 s and print their throughput and iteration lines.
pub fn pingpong(prog: &Path, server: &str, client: &str, extra: &[&str]) {
    pingpong_env(prog, server, client, extra, &[]);
}

/// [`pingpong`] with more environment variables for both processes.
pub fn pingpong_env(prog: &Path, server: &str, client: &str, extra: &[&str], env: &[(&str, &str)]) {
    let name = prog
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().into_owned());
    let mut args: Vec<String> = ["-g", "1"].iter().map(|s| s.to_string()).collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let (server_out, client_out) = run_pair(prog, server, client, &args, env);
    for (who, out, other) in [
        ("server", &server_out, &client_out),
        ("client", &client_out, &server_out),
    ] {
        let (stdout, stderr) = texts(out);
        let (other_stdout, other_stderr) = texts(other);
        assert!(
            out.status.success(),
            "{who} of {name} {extra:?} failed ({}):\n{stdout}{stderr}\n\
             its peer ({}):\n{other_stdout}{other_stderr}",
            out.status,
            other.status
        );
        assert!(
            stdout.contains(" bytes in ") && stdout.contains("Mbit/sec"),
            "{who}: no throughput line:\n{stdout}{stderr}"
        );
        assert!(
            stdout.contains(" iters in "),
            "{who}: no iteration line:\n{stdout}"
        );
        eprintln!("{who} {extra:?}: {}", stdout.lines().last().unwrap_or(""));
    }
}

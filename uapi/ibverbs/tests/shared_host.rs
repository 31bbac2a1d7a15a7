//! One device shared by many processes: unmodified `ibv_rc_pingpong`s, client and server on
//! one address, two servers on one address with their two clients at once, and sixteen
//! processes (eight pairs) at once, each process with its own QP on the device of its
//! address (127.0.42.1 and 127.0.42.2). Every run must exit 0 with its throughput lines.
//! Skips without `/usr/bin/ibv_rc_pingpong`.

mod common;

const A: &str = "127.0.42.1";
const B: &str = "127.0.42.2";

fn prog(test: &str) -> Option<std::path::PathBuf> {
    common::program("ibv_rc_pingpong", test)
}

/// `pairs` pingpongs at once, servers on `server`, clients on `client`.
fn at_once(prog: &std::path::Path, pairs: usize, server: &str, client: &str, extra: &[&str]) {
    std::thread::scope(|s| {
        for _ in 0..pairs {
            s.spawn(|| common::pingpong(prog, server, client, extra));
        }
    });
}

#[test]
fn client_and_server_on_one_address() {
    let Some(prog) = prog("client_and_server_on_one_address") else {
        return;
    };
    common::pingpong(&prog, A, A, &["-n", "200"]);
}

#[test]
fn two_servers_on_one_address_with_their_clients_at_once() {
    let Some(prog) = prog("two_servers_on_one_address_with_their_clients_at_once") else {
        return;
    };
    at_once(&prog, 2, A, B, &["-n", "300"]);
}

#[test]
fn sixteen_processes_with_a_qp_each() {
    let Some(prog) = prog("sixteen_processes_with_a_qp_each") else {
        return;
    };
    at_once(&prog, 8, B, A, &["-n", "100", "-s", "1024"]);
}

//! One device shared by many processes: unmodified `ibv_rc_pingpong`s, client and server on
//! one address, two servers on one address with their two clients at once, sixteen
//! processes (eight pairs) at once, and three `ib_write_bw` pairs at once, each process with
//! its own QP on the device of its address (127.0.42.1 and 127.0.42.2). Every run must exit
//! 0 with its throughput lines.
//! Skips without `/usr/bin/ibv_rc_pingpong` or `/usr/bin/ib_write_bw`.

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

#[test]
fn three_ib_write_bw_pairs_at_once_on_one_address_pair() {
    let Some(prog) = common::program(
        "ib_write_bw",
        "three_ib_write_bw_pairs_at_once_on_one_address_pair",
    ) else {
        return;
    };
    let args: Vec<String> = ["-x", "1", "-s", "65536", "-n", "300"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let (server, client) = common::run_pair(&prog, A, B, &args, &[]);
                const BW: &str = "BW average[MB/sec]";
                common::perftest_row("ib_write_bw server", &server, BW);
                // The client's result row: size, iterations, peak, average, rate.
                let row = common::perftest_row("ib_write_bw client", &client, BW);
                let fields: Vec<f64> = row
                    .split_whitespace()
                    .filter_map(|f| f.parse().ok())
                    .collect();
                assert!(
                    fields[0] == 65536.0 && fields[1] == 300.0,
                    "not 300 iterations of 64 KiB: {row}"
                );
                eprintln!("ib_write_bw client: {row}");
            });
        }
    });
}

//! rdma-core's unmodified `ibv_uc_pingpong -g 1` between two processes on softrnic's library,
//! one device each (`SOFTRNIC_ADDR` 127.0.24.1 for the server, 127.0.24.2 for the client), over
//! a free TCP port: both must exit 0 and print their throughput lines; with `-c` the data is
//! verified. Skips without `/usr/bin/ibv_uc_pingpong`.

mod common;

const SERVER: &str = "127.0.24.1";
const CLIENT: &str = "127.0.24.2";

#[test]
fn uc_pingpong_between_two_processes() {
    let Some(prog) = common::program("ibv_uc_pingpong", "uc_pingpong_between_two_processes") else {
        return;
    };
    common::pingpong(&prog, SERVER, CLIENT, &["-n", "100"]);
    common::pingpong(&prog, SERVER, CLIENT, &["-n", "100", "-c"]);
}

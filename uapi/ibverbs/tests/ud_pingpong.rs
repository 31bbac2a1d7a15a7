//! rdma-core's unmodified `ibv_ud_pingpong -g 1` between two processes on softrnic's library,
//! one device each (`SOFTRNIC_ADDR` 127.0.24.3 for the server, 127.0.24.4 for the client), over
//! a free TCP port: both must exit 0 and print their throughput lines; with `-c` the data is
//! verified. It needs address handles, the Q_Key, `src_qp` and the 40-byte GRH before each
//! received payload. Skips without `/usr/bin/ibv_ud_pingpong`.

mod common;

const SERVER: &str = "127.0.24.3";
const CLIENT: &str = "127.0.24.4";

#[test]
fn ud_pingpong_between_two_processes() {
    let Some(prog) = common::program("ibv_ud_pingpong", "ud_pingpong_between_two_processes") else {
        return;
    };
    common::pingpong(&prog, SERVER, CLIENT, &["-n", "100"]);
    common::pingpong(&prog, SERVER, CLIENT, &["-n", "100", "-c"]);
}

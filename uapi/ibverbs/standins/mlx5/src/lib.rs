//! A stand-in `libmlx5.so.1` for softrnic (see `../README.md`): the `mlx5dv_*` functions
//! perftest imports, each "not supported", so that perftest loads without rdma-core's mlx5
//! provider (which needs rdma-core's private libibverbs ABI). Pointers: NULL with
//! `errno = EOPNOTSUPP`; ints: `EOPNOTSUPP`.

#![allow(clippy::missing_safety_doc)]

include!("../../standin.rs");

unsupported! {
    "MLX5_1.7" fn mlx5dv_open_device(device: *mut libc::c_void, attr: *mut libc::c_void) -> ptr;
    "MLX5_1.3" fn mlx5dv_create_qp(context: *mut libc::c_void, qp_attr: *mut libc::c_void, mlx5_qp_attr: *mut libc::c_void) -> ptr;
    "MLX5_1.10" fn mlx5dv_qp_ex_from_ibv_qp_ex(qp: *mut libc::c_void) -> ptr;
    "MLX5_1.10" fn mlx5dv_create_mkey(mkey_init_attr: *mut libc::c_void) -> ptr;
    "MLX5_1.10" fn mlx5dv_destroy_mkey(mkey: *mut libc::c_void) -> int;
    "MLX5_1.7" fn mlx5dv_devx_general_cmd(context: *mut libc::c_void, r#in: *const libc::c_void, inlen: libc::size_t, out: *mut libc::c_void, outlen: libc::size_t) -> int;
    "MLX5_1.21" fn mlx5dv_crypto_login(context: *mut libc::c_void, login_attr: *mut libc::c_void) -> int;
    "MLX5_1.21" fn mlx5dv_dek_create(context: *mut libc::c_void, init_attr: *mut libc::c_void) -> ptr;
    "MLX5_1.21" fn mlx5dv_dek_destroy(dek: *mut libc::c_void) -> int;
}

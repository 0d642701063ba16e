//! `rocm-patchkit`: the user's command (doctor, rewrite-hipblaslt, ...);
//! the whole CLI is [`xtask::user`].

fn main() -> std::process::ExitCode {
    xtask::user::main()
}

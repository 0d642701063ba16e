//! `rocm-patchkit`: the user's command (doctor, rewrite-hipblaslt, ...);
//! the whole CLI is [`xtask::cli::user`].

fn main() -> std::process::ExitCode {
    xtask::cli::user::main()
}

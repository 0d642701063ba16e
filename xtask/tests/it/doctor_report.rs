//! `doctor --report`: the Markdown block for a bug report holds the
//! machine, the verdicts, the libraries, the knobs and the log's GPU
//! faults, and never the values of environment variables doctor does not
//! know nor the user's name (in a home folder, a log's path, the user's
//! own name from the machine's /etc/passwd and `$USER`).

use crate::support::doctor::FakeMachine;

const NAME: &str = "alice";
const SECRET: &str = "hunter2-do-not-post";

fn uid() -> String {
    let out = std::process::Command::new("id").arg("-u").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_report_block_leaves_out_unknown_variables_and_the_user_name() {
    let mut m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel("6.14.0-36-generic")
        .amdgpu(1)
        .rocm("7.1.1-53", "1.1.0")
        .file(
            "etc/os-release",
            "NAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nID=ubuntu\nID_LIKE=debian\n",
        )
        .file(
            "etc/passwd",
            &format!("{NAME}:x:{}:1000:Alice:/home/{NAME}:/bin/bash\n", uid()),
        )
        .file(
            &format!("home/{NAME}/venv/lib/python3.12/site-packages/torch/lib/libhipblaslt.so"),
            "ELF",
        )
        .file(
            &format!("home/{NAME}/venv/lib/python3.12/site-packages/torch/version.py"),
            "__version__ = '2.9.1+rocm7.1'\n",
        );
    let log = m.root().join(format!("home/{NAME}/dmesg.txt"));
    std::fs::write(
        &log,
        "[  169.822093] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32771)\n[  169.822100] amdgpu 0000:03:00.0: amdgpu:  Faulty UTCL2 client ID: TCP (0x8)\n",
    )
    .unwrap();
    m.env("SECRET_TOKEN", SECRET)
        .env("USER", NAME)
        .env("MIOPEN_DEBUG_CONV_GEMM", "0");
    let venv = format!("/home/{NAME}/venv");
    let log = log.display().to_string();
    let run = m.doctor(&["--report", "--python", &venv, "--log", &log]);
    run.fails_with(3);
    let md = &run.stdout;
    assert!(
        md.starts_with("<details><summary>rocm-patchkit doctor --report</summary>\n"),
        "{md}"
    );
    assert!(md.trim_end().ends_with("</details>"), "{md}");
    assert!(md.contains("- OS: Ubuntu 24.04\n"), "{md}");
    assert!(md.contains("| cwsr-expert-sched | AFFECTED |"), "{md}");
    assert!(
        md.contains(
            "| `~/venv/lib/python3.12/site-packages/torch/lib/libhipblaslt.so` | pytorch |"
        ),
        "{md}"
    );
    assert!(
        md.contains("`MIOPEN_DEBUG_CONV_GEMM=0` (environment)"),
        "{md}"
    );
    assert!(md.contains("TCP"), "the log's GPU fault: {md}");
    assert!(!md.contains(SECRET), "an unknown variable's value: {md}");
    assert!(!md.contains("SECRET_TOKEN"), "{md}");
    assert!(!md.to_lowercase().contains(NAME), "the user's name: {md}");
}

//! `doctor --log` on log excerpts written here in the formats the amdgpu
//! driver, ROCr and CLR print (a TCP, an SDMA and a CPF page fault of the
//! kernel log, ROCr's "Memory access fault by GPU node-N" line, a HIP log
//! naming a DTVB1 kernel): each names the known fault it points to, in
//! text and `--json`. A 1 GiB sparse log and a binary one are read bounded
//! (time and peak memory measured); a log doctor may not read is listed
//! under "could not read"; without `--log`, a `--root` machine's own
//! `/var/log/kern.log` is read, never this host's log.

use std::path::{Path, PathBuf};

use crate::support::bounded;
use crate::support::doctor::{fault, FakeMachine};

/// An RDNA4 machine on `kernel` with ROCm `rocm` and hipBLASLt `hipblaslt`.
fn rdna4(kernel: &str, rocm: &str, hipblaslt: &str) -> FakeMachine {
    let m = FakeMachine::new();
    m.gpu(1, 120001, 30032)
        .kernel(kernel)
        .amdgpu(1)
        .rocm(rocm, hipblaslt);
    m
}

/// A log file beside the machine (a host path, as the user gives it).
fn log_file(m: &FakeMachine, name: &str, text: &[u8]) -> PathBuf {
    let path = m.root().parent().unwrap().join(format!(
        "{}-{name}",
        m.root().file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

/// `doctor --json --log <paths>`, parsed; its exit status is checked by
/// the caller through the run.
fn report_with_logs(m: &FakeMachine, logs: &[&Path]) -> (crate::support::Run, serde_json::Value) {
    let mut args: Vec<String> = vec!["--json".into(), "--log".into()];
    args.extend(logs.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = m.doctor(&args);
    let json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}\n{}\n{}", run.stdout, run.stderr));
    (run, json)
}

fn text_with_logs(m: &FakeMachine, logs: &[&Path]) -> crate::support::Run {
    let mut args: Vec<String> = vec!["--log".into()];
    args.extend(logs.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    m.doctor(&args)
}

fn faults_seen(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["logs"]["faults"].as_array().unwrap()
}

/// A kernel-log page-fault block as `gmc_v12_0.c` and `gfxhub_v12_0.c` of
/// Linux 6.18 print it, in dmesg's form.
fn dmesg_block(
    at: &str,
    process: &str,
    pid: u32,
    pasid: u32,
    address: &str,
    client: &str,
    id: u32,
) -> String {
    format!(
        "[{at}] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:{pasid})\n\
         [{at}] amdgpu 0000:03:00.0: amdgpu:  Process {process} pid {pid} thread {process} pid {pid}\n\
         [{at}] amdgpu 0000:03:00.0: amdgpu:   in page starting at address {address} from client 10\n\
         [{at}] amdgpu 0000:03:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00800A30\n\
         [{at}] amdgpu 0000:03:00.0: amdgpu: \t Faulty UTCL2 client ID: {client} (0x{id:x})\n\
         [{at}] amdgpu 0000:03:00.0: amdgpu: \t MORE_FAULTS: 0x0\n"
    )
}

#[test]
fn a_tcp_fault_points_to_the_expert_scheduling_fault_of_this_machine() {
    let m = rdna4("6.14.0-36-generic", "7.1.1-53", "1.1.0");
    let text = format!(
        "[  801.000001] usb 1-2: new high-speed USB device\n{}",
        dmesg_block(
            "  812.004411",
            "pt_main_thread",
            4242,
            32771,
            "0x00007a1c00200000",
            "TCP",
            8
        )
    );
    let log = log_file(&m, "dmesg.txt", text.as_bytes());
    let (run, report) = report_with_logs(&m, &[&log]);
    run.fails_with(3);
    let seen = faults_seen(&report);
    assert_eq!(seen.len(), 1, "{report:#}");
    let f = &seen[0];
    assert_eq!(f["kind"], "page-fault");
    assert_eq!(f["line"], 2);
    assert_eq!(f["time"], "812.004411");
    assert_eq!(f["process"], "pt_main_thread");
    assert_eq!(f["pid"], 4242);
    assert_eq!(f["pasid"], 32771);
    assert_eq!(f["address"], "0x00007a1c00200000");
    assert_eq!(f["client"], "TCP");
    assert!(f["client_is"].as_str().unwrap().contains("shader"), "{f:#}");
    let first = &f["points_to"][0];
    assert_eq!(first["id"], "cwsr-expert-sched", "{f:#}");
    assert_eq!(first["here"], "affected", "{f:#}");
    assert!(f["unknown"].is_null());
    // A fault known from logs only, with a log read: its verdict says what
    // the log showed of it, never to run doctor with --log.
    let rocr = fault(&report, "rocr-trap-sched-mode");
    let why = rocr["why"].as_str().unwrap();
    assert!(
        why.contains("no fault in the logs read is its alone") && !why.contains("--log"),
        "{rocr:#}"
    );
    text_with_logs(&m, &[&log])
        .stdout_has("\nGPU faults in logs\n")
        .stdout_has(
            ": gfxhub page fault of pt_main_thread pid 4242 pasid 32771 at 0x00007a1c00200000",
        )
        .stdout_has("client TCP: a shader's memory access")
        .stdout_has("points to cwsr-expert-sched (AFFECTED here, by client TCP)");
}

#[test]
fn an_sdma_fault_points_to_the_6_18_regression() {
    let m = rdna4("6.18.5-arch1-1", "7.1.1-53", "1.1.0");
    let journal = "\
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:169 vmid:8 pasid:32770)
Mar 02 21:14:07 box systemd-coredump[9911]: Process 7001 (python3) of user 1000 terminated abnormally with signal 6/ABRT
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu:  Process python3 pid 7001 thread python3 pid 7003
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu:   in page starting at address 0x00007f10a0000000 from client 10
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00801D3B
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: \t Faulty UTCL2 client ID: SDMA1 (0xe)
";
    let log = log_file(&m, "journal.txt", journal.as_bytes());
    let (run, report) = report_with_logs(&m, &[&log]);
    run.success();
    let sdma = fault(&report, "sdma-page-fault-6.18");
    assert_eq!(sdma["status"], "info", "{sdma:#}");
    assert_eq!(sdma["severity"], "info");
    let f = &faults_seen(&report)[0];
    assert_eq!(f["time"], "Mar 02 21:14:07");
    assert_eq!(f["client"], "SDMA1");
    assert_eq!(f["points_to"][0]["id"], "sdma-page-fault-6.18", "{f:#}");
    assert_eq!(f["points_to"].as_array().unwrap().len(), 1, "{f:#}");
    text_with_logs(&m, &[&log])
        .success()
        .stdout_has("client SDMA1: the SDMA copy engine")
        .stdout_has("points to sdma-page-fault-6.18 (affected here (info), by client SDMA1)");
    // the same log read on a 6.17 machine still names it, not affected here
    let m = rdna4("6.17.9-arch1-1", "7.1.1-53", "1.1.0");
    let log = log_file(&m, "journal.txt", journal.as_bytes());
    let (_, report) = report_with_logs(&m, &[&log]);
    assert_eq!(
        fault(&report, "sdma-page-fault-6.18")["status"],
        "not-affected"
    );
    let f = &faults_seen(&report)[0];
    assert_eq!(f["points_to"][0]["here"], "not-affected", "{f:#}");
}

#[test]
fn a_cpf_fault_is_unknown_and_says_what_to_attach() {
    let m = rdna4("6.14.0-36-generic", "7.1.1-53", "1.1.0");
    let old = "\
[ 77.100000] amdgpu 0000:2b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:0 pasid:0, for process  pid 0 thread  pid 0)
[ 77.100002] amdgpu 0000:2b:00.0: amdgpu:   in page starting at address 0x0000000100200000 from client 10
[ 77.100004] amdgpu 0000:2b:00.0: amdgpu:          Faulty UTCL2 client ID: CPF (0x4)
";
    let log = log_file(&m, "old-dmesg.txt", old.as_bytes());
    let (_, report) = report_with_logs(&m, &[&log]);
    let f = &faults_seen(&report)[0];
    assert_eq!(f["client"], "CPF");
    assert!(f["process"].is_null() && f["pid"].is_null(), "{f:#}");
    assert!(f["points_to"].as_array().unwrap().is_empty(), "{f:#}");
    assert!(
        f["client_is"].as_str().unwrap().contains("firmware"),
        "{f:#}"
    );
    let unknown = f["unknown"].as_str().unwrap();
    for needed in [
        "report it",
        "AMD_LOG_LEVEL=4",
        "amdgpu.dyndbg=+flmpt",
        "sudo dmesg",
        "firmware",
    ] {
        assert!(unknown.contains(needed), "{needed}: {unknown}");
    }
    text_with_logs(&m, &[&log])
        .stdout_has("client CPF: the command processor")
        .stdout_has("unknown: no known fault has this signature; report it");
}

#[test]
fn the_job_line_alone_asks_for_the_kernel_log() {
    let m = rdna4("6.14.0-36-generic", "7.1.1-53", "1.1.0");
    let job = "\
epoch 3 step 1400 loss 2.31
Memory access fault by GPU node-1 (Agent handle: 0x5a5a12340000) on address 0x7e0a55e01000. Reason: Page not present or supervisor privilege.
Aborted (core dumped)
";
    let log = log_file(&m, "job.err", job.as_bytes());
    let (_, report) = report_with_logs(&m, &[&log]);
    let f = &faults_seen(&report)[0];
    assert_eq!(f["kind"], "memory-access-fault");
    assert_eq!(f["node"], 1);
    assert_eq!(f["address"], "0x7e0a55e01000");
    assert_eq!(f["reason"], "Page not present or supervisor privilege");
    assert!(
        f["unknown"].as_str().unwrap().contains("kernel log"),
        "{f:#}"
    );
    text_with_logs(&m, &[&log]).stdout_has(
        ": memory access fault by GPU node-1 at 0x7e0a55e01000: Page not present or supervisor privilege",
    );
}

#[test]
fn a_hip_log_naming_a_dtvb1_kernel_points_to_the_dtvb_fault() {
    let m = rdna4("6.18.5-arch1-1", "7.2.0-43", "1.2.0");
    let kernel = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_SN_LDSB1_DTVB1_GRVWA8_ISA1201_WG16_16_1";
    let hip = format!(
        ":3:hip_module.cpp           :550 : 5120034 us: [pid:7001 tid: 0x7f00]  hipExtModuleLaunchKernel ( 0x0x7f001, 256, 1, 1, 128, 1, 1, 0, stream:<null>, char array:<null>, 0x7f002, event:0, event:0, 0 )\n\
         :3:rocvirtual.cpp           :3016: 5120040 us: [pid:7001 tid: 0x7f00] ShaderName : {kernel}\n\
         :3:hip_module.cpp           :551 : 5120044 us: [pid:7001 tid: 0x7f00] hipExtModuleLaunchKernel: Returned hipSuccess : \n\
         :3:rocvirtual.cpp           :3016: 5120055 us: [pid:7001 tid: 0x7f00] ShaderName : _ZN2at6native29vectorized_elementwise_kernelILi4E\n\
         Memory access fault by GPU node-1 (Agent handle: 0x55aa00) on address 0x7e0a55e01000. Reason: Page not present or supervisor privilege.\n"
    );
    let log = log_file(&m, "hip.log", hip.as_bytes());
    let (run, report) = report_with_logs(&m, &[&log]);
    run.fails_with(3);
    assert_eq!(fault(&report, "tensile-gltr-dtvb1")["status"], "affected");
    let f = &faults_seen(&report)[0];
    assert_eq!(f["kernels"][0], kernel, "{f:#}");
    assert_eq!(f["points_to"][0]["id"], "tensile-gltr-dtvb1", "{f:#}");
    assert_eq!(f["points_to"][0]["by"], format!("kernel {kernel}"));
    assert!(f["unknown"].is_null());
    let k = &report["logs"]["kernels"][0];
    assert_eq!(k["kernel"], kernel);
    assert_eq!(k["launches"], 1);
    assert_eq!(k["faults"][0], "tensile-gltr-dtvb1");
    text_with_logs(&m, &[&log])
        .stdout_has(&format!("after kernel {kernel}"))
        .stdout_has("points to tensile-gltr-dtvb1 (AFFECTED here, by kernel Cijk_");
}

#[test]
fn logs_doctor_may_not_read_are_listed_under_could_not_read() {
    let m = rdna4("6.14.0-36-generic", "7.1.1-53", "1.1.0");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("kernel.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let below = file.join("dmesg.txt");
    let missing = dir.path().join("missing.txt");
    let folder = dir.path();
    let logs = [fifo.as_path(), folder, below.as_path(), missing.as_path()];
    let mut cmd = m.doctor_command(&[]);
    cmd.arg("--json").arg("--log").args(logs);
    let run = bounded::run(&cmd, 1 << 30, 30);
    run.ended_with(&[3]);
    assert!(run.seconds < 10.0, "{:.1}s", run.seconds);
    let report: serde_json::Value = serde_json::from_str(&run.run.stdout).unwrap();
    let unread = report["machine"]["unread"].as_array().unwrap();
    let why = |p: &Path| {
        unread
            .iter()
            .find(|u| u["path"] == p.display().to_string())
            .unwrap_or_else(|| panic!("{} not under could not read: {unread:#?}", p.display()))
            ["why"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        why(&fifo).contains("is a FIFO, not a file"),
        "{}",
        why(&fifo)
    );
    assert!(why(&fifo).contains("journalctl -k > kernel.log"));
    assert!(why(folder).contains("is a folder, not a file"));
    assert!(why(&below).contains("not a folder"), "{}", why(&below));
    assert_eq!(why(&missing), "does not exist");
    assert!(report["logs"]["read"].as_array().unwrap().is_empty());
    let mut cmd = m.doctor_command(&[]);
    cmd.arg("--log").arg(&fifo).env("COLUMNS", "1000");
    let text = bounded::run(&cmd, 1 << 30, 30);
    text.ended_with(&[3]);
    assert!(
        text.run
            .stdout
            .contains(&format!("  - {}: is a FIFO, not a file", fifo.display())),
        "{}",
        text.run.stdout
    );
}

#[test]
fn a_gigabyte_sparse_log_is_read_at_its_end_and_bounded() {
    if !bounded::available() {
        return;
    }
    let m = rdna4("6.14.0-36-generic", "7.1.1-53", "1.1.0");
    let block = dmesg_block(
        "99999.000001",
        "python3",
        777,
        32790,
        "0x00007f0000001000",
        "TCP",
        8,
    );
    let log = log_file(&m, "huge.txt", b"");
    let file = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    let len = 1u64 << 30;
    file.set_len(len).unwrap();
    use std::os::unix::fs::FileExt;
    file.write_all_at(
        format!("\n{block}").as_bytes(),
        len - block.len() as u64 - 1,
    )
    .unwrap();
    let mut cmd = m.doctor_command(&[]);
    cmd.env("MALLOC_ARENA_MAX", "2")
        .arg("--json")
        .arg("--log")
        .arg(&log);
    let run = bounded::run(&cmd, 1 << 30, 60);
    run.ended_with(&[3]);
    eprintln!(
        "doctor on a 1 GiB sparse log: {:.2}s, peak {} KiB",
        run.seconds, run.peak_kib
    );
    assert!(run.seconds < 10.0, "{:.1}s", run.seconds);
    assert!(run.peak_kib < 256 << 10, "peak {} KiB", run.peak_kib);
    let report: serde_json::Value = serde_json::from_str(&run.run.stdout).unwrap();
    let read = &report["logs"]["read"][0];
    assert_eq!(read["cut"], "read its last 64.0 MiB of 1.0 GiB", "{read:#}");
    let f = &faults_seen(&report)[0];
    assert_eq!(
        (f["pid"].as_u64(), f["client"].as_str()),
        (Some(777), Some("TCP")),
        "{f:#}"
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn a_binary_log_is_read_lossily_bounded_and_printed_escaped() {
    if !bounded::available() {
        return;
    }
    let m = rdna4("6.14.0-36-generic", "7.1.1-53", "1.1.0");
    // 32 MiB of noise (no newline for long stretches, every byte value),
    // with a fault whose process name carries an escape sequence
    let mut bytes = Vec::with_capacity(32 << 20);
    let mut x: u64 = 0x9e3779b97f4a7c15;
    while bytes.len() < 32 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    let block = dmesg_block(
        "5.000001",
        "evil\u{1b}[2Jname",
        66,
        32771,
        "0x0000000000001000",
        "TCP",
        8,
    );
    bytes.extend_from_slice(b"\n");
    bytes.extend_from_slice(block.as_bytes());
    bytes.extend_from_slice(&[0xff, 0xfe, 0x00, b'\n']);
    let log = log_file(&m, "binary.log", &bytes);
    let mut cmd = m.doctor_command(&[]);
    cmd.env("MALLOC_ARENA_MAX", "2").arg("--log").arg(&log);
    let run = bounded::run(&cmd, 1 << 30, 60);
    run.ended_with(&[3]);
    eprintln!(
        "doctor on a 32 MiB binary log: {:.2}s, peak {} KiB",
        run.seconds, run.peak_kib
    );
    assert!(run.seconds < 10.0, "{:.1}s", run.seconds);
    assert!(run.peak_kib < 256 << 10, "peak {} KiB", run.peak_kib);
    assert!(
        !run.run.stdout.contains('\u{1b}'),
        "a raw escape reached the output"
    );
    assert!(
        run.run.stdout.contains("evil\\x1b[2Jname pid 66"),
        "{}",
        run.run.stdout
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn without_log_a_root_machine_is_read_from_its_own_kern_log() {
    let m = rdna4("6.18.5-arch1-1", "7.1.1-53", "1.1.0");
    let (_, report) = m.report();
    let note = report["logs"]["note"].as_str().unwrap();
    assert!(note.contains("no /var/log/kern.log below --root"), "{note}");
    assert!(note.contains("--log"), "{note}");
    assert!(report["logs"]["read"].as_array().unwrap().is_empty());
    m.file(
        "var/log/kern.log",
        &("Mar 02 21:14:06 box kernel: usb 1-2: new device\n".to_owned()
            + &dmesg_block(
                "  812.004411",
                "python3",
                7001,
                32770,
                "0x00007f10a0000000",
                "SDMA0",
                0xd,
            )),
    );
    let (_, report) = m.report();
    assert!(report["logs"]["note"].is_null());
    assert_eq!(
        report["logs"]["read"][0]["source"],
        "/var/log/kern.log (below --root)"
    );
    assert_eq!(report["logs"]["read"][0]["lines"], 7);
    let f = &faults_seen(&report)[0];
    assert_eq!(f["client"], "SDMA0");
    assert_eq!(f["points_to"][0]["id"], "sdma-page-fault-6.18");
    m.doctor(&[])
        .stdout_has("  read   /var/log/kern.log (below --root) (7 lines)\n");
}

#[test]
fn the_new_faults_are_judged_on_the_machine() {
    // the ROCr trap-handler fault: known from logs only
    let m = rdna4("6.18.5-arch1-1", "7.1.1-53", "1.1.0");
    let (_, report) = m.report();
    let rocr = fault(&report, "rocr-trap-sched-mode");
    assert_eq!(rocr["status"], "cannot-tell", "{rocr:#}");
    assert!(rocr["why"].as_str().unwrap().contains("--log"), "{rocr:#}");
    let rdna3 = FakeMachine::new();
    rdna3
        .gpu(1, 110000, 29772)
        .kernel("6.18.5-arch1-1")
        .amdgpu(1);
    let (_, report) = rdna3.report();
    assert_eq!(
        fault(&report, "rocr-trap-sched-mode")["status"],
        "not-affected"
    );
    // the SDMA regression: every kernel from 6.18 on, RDNA3 included
    assert_eq!(fault(&report, "sdma-page-fault-6.18")["status"], "info");
    let old = FakeMachine::new();
    old.gpu(1, 110000, 29772)
        .kernel("6.12.48+deb13-amd64")
        .amdgpu(1);
    let (_, report) = old.report();
    let sdma = fault(&report, "sdma-page-fault-6.18");
    assert_eq!(sdma["status"], "not-affected", "{sdma:#}");
}

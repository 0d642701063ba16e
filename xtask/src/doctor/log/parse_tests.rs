//! The parser on excerpts written here in the formats the amdgpu driver
//! (`gmc_v12_0.c`, `gfxhub_v12_0.c`, `amdgpu_vm.c` of Linux 6.18; the
//! older one-line process form), ROCr (`runtime.cpp`) and CLR's HIP log
//! print them.

use super::*;
use crate::input::knowledge::LogFacts;

fn events(source: &str, text: &str, patterns: &[Glob]) -> Events {
    let mut events = Events::default();
    let mut parser = Parser::new(source, patterns, &mut events);
    for (i, line) in text.lines().enumerate() {
        parser.line(i as u64 + 1, line);
    }
    parser.finish();
    events
}

fn dtvb() -> Vec<Glob> {
    let text = "[[fault]]\nid = \"x\"\ntitle = \"t\"\nseverity = \"fault\"\ngfx = [\"gfx1201\"]\nsummary = \"s\"\nlinks = [\"https://a\"]\nworkaround = \"w\"\n[fault.log]\nkernels = [\"Cijk_*DTVB1*\"]\n";
    let k = crate::input::knowledge::parse(std::path::Path::new("k.toml"), text).unwrap();
    let facts: &LogFacts = &k.faults[0].log;
    facts.kernels.clone()
}

const DMESG_618: &str = "\
[  812.004411] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:32771)
[  812.004420] amdgpu 0000:03:00.0: amdgpu:  Process pt_main_thread pid 4242 thread pt_main_thread pid 4250
[  812.004424] amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007a1c00200000 from client 10
[  812.004427] amdgpu 0000:03:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00800A30
[  812.004430] amdgpu 0000:03:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)
[  812.004433] amdgpu 0000:03:00.0: amdgpu: \t MORE_FAULTS: 0x0
[  812.004436] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:9 pasid:32771)
[  812.004440] amdgpu 0000:03:00.0: amdgpu:  Process pt_main_thread pid 4242 thread pt_main_thread pid 4250
[  812.004441] amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007a1c00201000 from client 10
[  812.004443] amdgpu 0000:03:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)
";

#[test]
fn a_618_page_fault_block_is_read_and_its_repeat_counted() {
    let e = events("dmesg.txt", DMESG_618, &[]);
    assert_eq!(e.kept.len(), 1, "{:#?}", e.kept);
    let f = &e.kept[0];
    assert_eq!(f.kind, EventKind::PageFault);
    assert_eq!(f.line, 1);
    assert_eq!(f.time.as_deref(), Some("812.004411"));
    assert_eq!(f.hub.as_deref(), Some("gfxhub"));
    assert_eq!(f.pasid, Some(32771));
    assert_eq!(f.process.as_deref(), Some("pt_main_thread"));
    assert_eq!(f.pid, Some(4242));
    assert_eq!(f.address.as_deref(), Some("0x00007a1c00200000"));
    assert_eq!(f.client.as_deref(), Some("TCP"));
    assert_eq!(f.repeats, 1);
}

#[test]
fn journal_lines_and_the_older_process_forms_are_read() {
    let journal = "\
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:169 vmid:8 pasid:32770)
Mar 02 21:14:07 box systemd-coredump[9911]: Process 7001 (python3) of user 1000 terminated abnormally with signal 6/ABRT
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu:  Process python3 pid 7001 thread python3 pid 7003
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu:   in page starting at address 0x00007f10a0000000 from client 10
Mar 02 21:14:07 box kernel: amdgpu 0000:0c:00.0: amdgpu: \t Faulty UTCL2 client ID: SDMA1 (0xe)
";
    let e = events("journal", journal, &[]);
    let f = &e.kept[0];
    assert_eq!(f.time.as_deref(), Some("Mar 02 21:14:07"));
    assert_eq!(
        (f.process.as_deref(), f.pid, f.client.as_deref()),
        (Some("python3"), Some(7001), Some("SDMA1"))
    );
    let old = "\
[ 77.1] amdgpu 0000:2b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:0 pasid:0, for process  pid 0 thread  pid 0)
[ 77.2] amdgpu 0000:2b:00.0: amdgpu:   in page starting at address 0x0000000100200000 from client 10
[ 77.3] amdgpu 0000:2b:00.0: amdgpu:          Faulty UTCL2 client ID: CPF (0x4)
[ 90.1] amdgpu 0000:2b:00.0: amdgpu: [mmhub0] no-retry page fault (src_id:0 ring:0 vmid:3 pasid:32769, for process ollama pid 3301 thread ollama pid 3302)
[ 90.2] amdgpu 0000:2b:00.0: amdgpu:  in process ollama pid 3301 thread ollama pid 3302)
[ 90.3] amdgpu 0000:2b:00.0: amdgpu:   in page starting at address 0x0000000000001000 from IH client 0x12 (VMC)
[ 90.4] amdgpu 0000:2b:00.0: amdgpu:   Faulty UTCL2 client ID: 0x9
";
    let e = events("old.txt", old, &[]);
    assert_eq!(e.kept.len(), 2, "{:#?}", e.kept);
    assert_eq!(e.kept[0].process, None);
    assert_eq!(e.kept[0].pid, None);
    assert_eq!(e.kept[0].client.as_deref(), Some("CPF"));
    assert_eq!(e.kept[1].hub.as_deref(), Some("mmhub0"));
    assert_eq!(e.kept[1].process.as_deref(), Some("ollama"));
    assert_eq!(e.kept[1].pid, Some(3301));
    assert_eq!(e.kept[1].client.as_deref(), Some("0x9"));
}

#[test]
fn the_runtime_line_is_read_in_each_of_its_forms() {
    let job = "\
step 1400 loss 2.31
Memory access fault by GPU node-1 (Agent handle: 0x5a5a12340000) on address 0x7e0a55e01000. Reason: Page not present or supervisor privilege.
Memory access fault by GPU node-2 on address 0x1000(may not be exact address). Reason: Write access to a read-only page.
Memory access fault by GPU node-3 (Agent handle: 0x1) on address (nil). Reason: Unknown.
";
    let e = events("job.err", job, &[]);
    let got: Vec<_> = e
        .kept
        .iter()
        .map(|f| (f.kind, f.node, f.address.as_deref(), f.reason.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                EventKind::MemoryAccessFault,
                Some(1),
                Some("0x7e0a55e01000"),
                Some("Page not present or supervisor privilege")
            ),
            (
                EventKind::MemoryAccessFault,
                Some(2),
                Some("0x1000"),
                Some("Write access to a read-only page")
            ),
            (
                EventKind::MemoryAccessFault,
                Some(3),
                Some("(nil)"),
                Some("Unknown")
            ),
        ]
    );
}

#[test]
fn a_hip_log_binds_the_kernels_it_launched_to_the_fault_after_them() {
    let hip = "\
:3:hip_module.cpp           :550 : 5120034 us: [pid:7001 tid: 0x7f00]  hipExtModuleLaunchKernel ( 0x0x7f001, 256, 1, 1, 128, 1, 1, 0, stream:<null>, char array:<null>, 0x7f002, event:0, event:0, 0 )
:3:rocvirtual.cpp           :3016: 5120040 us: [pid:7001 tid: 0x7f00] ShaderName : Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_SN_LDSB1_DTVB1_GRVWA8_ISA1201_WG16_16_1
:3:rocvirtual.cpp           :3016: 5120055 us: [pid:7001 tid: 0x7f00] ShaderName : _ZN2at6native29vectorized_elementwise_kernelILi4E
:3:rocvirtual.cpp           :3016: 5120090 us: [pid:7001 tid: 0x7f00] ShaderName : Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_SN_LDSB1_DTVB1_GRVWA8_ISA1201_WG16_16_1
Memory access fault by GPU node-1 (Agent handle: 0x55aa) on address 0x7e0a55e01000. Reason: Page not present or supervisor privilege.
";
    let e = events("hip.log", hip, &dtvb());
    assert_eq!(e.kept.len(), 1);
    let kernel =
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_SN_LDSB1_DTVB1_GRVWA8_ISA1201_WG16_16_1";
    assert_eq!(e.kept[0].kernels, [kernel]);
    assert_eq!(e.kernels["hip.log"][kernel], 2);
}

#[test]
fn hostile_lines_stay_bounded() {
    let name = "Cijk_".to_owned() + &"DTVB1_".repeat(5000);
    let mut text = format!("ShaderName : {name}\n");
    for i in 0..200 {
        text.push_str(&format!(
            "[{i}] amdgpu: [gfxhub] page fault (src_id:0 ring:1 vmid:1 pasid:{i})\n"
        ));
    }
    text.push_str(&format!(
        "[9] amdgpu: [{}] page fault (src_id:0 ring:1 vmid:1 pasid:99999999999999)\n",
        "h".repeat(10_000)
    ));
    let e = events("bad", &text, &dtvb());
    assert_eq!(e.kept.len(), MAX_EVENTS);
    assert_eq!(e.dropped, 201 - MAX_EVENTS as u64);
    assert!(!e.kernels.contains_key("bad"), "a 30 KB name is no kernel");
    let last = e.kept.back().unwrap();
    assert!(last.hub.as_ref().unwrap().len() <= 16);
    assert_eq!(last.pasid, None);
}

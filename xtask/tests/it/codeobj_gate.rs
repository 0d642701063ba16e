//! Kernel files judged by what runs: a gfx1201 kernel assembled by
//! `llvm-mc-19` whose expert-scheduling switch is skipped unless the
//! kernel argument `ESMRuntimeSupported` is set (tensilelite's form from
//! rocm-libraries PR #6261) is gated; the same switch without the test, or
//! behind a branch that skips more, tests another argument or can be
//! reached past the test, is on.

use xtask::gpu::codeobj::{judge_bytes, FileVerdict};

use crate::support::codeobj::{assemble_gfx1201, gated_kernel_file, gated_kernel_source, Gating};

const KERNEL: &str = "Cijk_Alik_Bljk_BBS_BH_UserArgs_MT64x64x64_DTVB1_ISA1201";

fn verdict(gating: Gating) -> Option<FileVerdict> {
    gated_kernel_file(KERNEL, gating).map(|file| judge_bytes(&file))
}

#[test]
fn the_generators_form_is_gated_naming_the_kernel_argument_and_the_site() {
    for (gating, register) in [(Gating::Gated, "v5 <- s47"), (Gating::GatedScc, "s47")] {
        let Some(v) = verdict(gating) else { return };
        let FileVerdict::Gated { gfx, offset, gate } = v else {
            panic!("{gating:?}: {v:?}")
        };
        assert_eq!(gfx, "gfx1201");
        assert_eq!(gate.kernel, KERNEL);
        assert_eq!(gate.argument, "ESMRuntimeSupported");
        assert_eq!(gate.arg_offset, 104);
        assert_eq!(gate.register, register, "{gating:?}");
        assert!(offset > 0);
    }
}

/// Why the first site of the kernel of `gating` is not gated.
fn why_not(gating: Gating) -> Option<String> {
    use xtask::gpu::codeobj::{elf, gate, isa};
    let object = assemble_gfx1201(&gated_kernel_source(KERNEL, gating))?;
    let code = elf::parse(&object).unwrap();
    let sites = isa::sched_mode_sites(&code).unwrap();
    assert_eq!(sites.len(), 1, "one site that switches it on");
    let gates = gate::of_sites(&object, &code, &sites).unwrap();
    Some(gates[0].clone().unwrap_err())
}

#[test]
fn a_switch_the_branch_does_not_skip_alone_is_on() {
    for (gating, why) in [
        (Gating::Ungated, "no conditional branch"),
        (Gating::BranchesElsewhere, "does not skip exactly the site"),
        (
            Gating::OtherArgument,
            "s46 is not where the kernel loads the argument",
        ),
        (Gating::SiteReachedPastTest, "a branch lands on the site"),
    ] {
        let Some(reason) = why_not(gating) else {
            return;
        };
        assert!(reason.contains(why), "{gating:?}: {reason}");
        let Some(v) = verdict(gating) else { return };
        assert!(
            matches!(v, FileVerdict::On { ref gfx, .. } if gfx == "gfx1201"),
            "{gating:?}: {v:?}"
        );
    }
}

//! What a UTCL2 client of amdgpu's page-fault report is: the part of the
//! GPU whose memory access faulted, as the driver's client tables name them
//! (`gfxhub_client_ids` of `gfxhub_v12_0.c`, `gfxhub_v3_0.c`, ...). Facts
//! of the hardware, not of any known fault (those are `[fault.log]`).

/// What the part named `client` does, said for the user.
pub(crate) fn meaning(client: &str) -> Option<&'static str> {
    let m = match client {
        "TCP" => "a shader's memory access (a GPU kernel: a library's GEMM, expert scheduling, an out-of-bounds read)",
        "SQC (inst)" | "SQC (data)" | "SQG/PC/SC" | "SQG" | "SQC" => {
            "a shader's instruction or constant fetch (a GPU kernel's code or arguments)"
        }
        c if c.starts_with("SDMA") => {
            "the SDMA copy engine (transfers between host and GPU memory, e.g. pinned host memory)"
        }
        "CPF" | "CPC" | "CPG" => {
            "the command processor (its firmware: MES, the queues; firmware versions below)"
        }
        "RLC" => "the RLC (GPU power and context firmware)",
        "CB" | "DB" | "GE1" | "GE2" | "PA" => "the graphics pipeline (rendering, not compute)",
        "VMC" | "VCNU" | "VCNRD" | "VCNWR" | "JPEG" => "a media or memory hub client (mmhub)",
        _ => return None,
    };
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::meaning;

    #[test]
    fn the_clients_that_tell_faults_apart_have_a_meaning() {
        assert!(meaning("TCP").unwrap().contains("shader"));
        assert!(meaning("SDMA0").unwrap().contains("SDMA"));
        assert!(meaning("SDMA1").unwrap().contains("SDMA"));
        assert!(meaning("CPF").unwrap().contains("firmware"));
        assert_eq!(meaning("0x9"), None);
    }
}

//! initramfs-tools on this machine: the image of a kernel listed, and a
//! module listed in `/etc/initramfs-tools/modules` for a while.

use std::process::Command;

use crate::support::tools::run;

/// The list of modules initramfs-tools adds to every image.
pub(crate) const MODULES: &str = "/etc/initramfs-tools/modules";

/// The listing of the initramfs image of `kernel`.
pub(crate) fn lsinitramfs(kernel: &str) -> String {
    run(Command::new("lsinitramfs").arg(format!("/boot/initrd.img-{kernel}")))
        .success()
        .stdout
        .clone()
}

/// A module added to /etc/initramfs-tools/modules for the life of this
/// value; the file and the initramfs of `kernel` are put back on drop.
pub(crate) struct ListedForInitramfs {
    before: Option<String>,
    kernel: String,
}

impl ListedForInitramfs {
    pub(crate) fn add(module: &str, kernel: &str) -> ListedForInitramfs {
        let before = std::fs::read_to_string(MODULES).ok();
        let mut listed = before.clone().unwrap_or_default();
        listed.push_str(&format!("{module}\n"));
        std::fs::write(MODULES, listed).unwrap();
        ListedForInitramfs {
            before,
            kernel: kernel.to_owned(),
        }
    }
}

impl Drop for ListedForInitramfs {
    fn drop(&mut self) {
        put_back_modules(&self.before, &self.kernel);
    }
}

/// Writes /etc/initramfs-tools/modules back as it was (`None`: absent) and
/// rebuilds the initramfs of `kernel`; errors ignored, as in a drop.
pub(crate) fn put_back_modules(before: &Option<String>, kernel: &str) {
    match before {
        Some(text) => {
            let _ = std::fs::write(MODULES, text);
        }
        None => {
            let _ = std::fs::remove_file(MODULES);
        }
    }
    let _ = Command::new("update-initramfs")
        .args(["-u", "-k", kernel])
        .output();
}

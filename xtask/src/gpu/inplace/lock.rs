//! One rewrite of a library at a time: the kernel folder itself is locked
//! (`flock` on the folder, so nothing is written to take the lock and a
//! read-only library can still be checked), exclusively by the rewrite and
//! `--undo`, shared by `--check`. A run that finds it held says so and
//! waits, as `build-dkms` does for its recipe's work folder.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};

use crate::shared::report::Reporter;

/// Held while a library is read or changed; released when dropped.
pub(crate) struct LibraryLock {
    _dir: File,
}

/// Locks the kernel folder `kernels`: shared when `shared` (a `--check`),
/// else exclusive; waits, saying so, while another run holds it.
pub(crate) fn lock(kernels: &Path, shared: bool, reporter: &Reporter) -> Result<LibraryLock> {
    let dir = File::open(kernels).with_context(|| format!("opening {}", kernels.display()))?;
    let tried = if shared {
        dir.try_lock_shared()
    } else {
        dir.try_lock()
    };
    match tried {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            reporter.step(format!(
                "waiting: another rewrite-hipblaslt is working on {} (it holds the lock on that \
                 folder); this one goes on when it is done",
                kernels.display()
            ));
            let locked = if shared {
                dir.lock_shared()
            } else {
                dir.lock()
            };
            locked.with_context(|| format!("locking {}", kernels.display()))?;
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", kernels.display()))
        }
    }
    Ok(LibraryLock { _dir: dir })
}

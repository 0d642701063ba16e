//! Where a patch's paths land in a tree (`strip`, `directory`): a value the
//! recipe reads and the patch engine and the patch fetcher use.

/// Where a patch's paths land in the tree: `strip` leading folders dropped
/// (after `a/` and `b/`), then put under `directory`; as `patch -p<1+strip>`
/// and `git am --directory` do. A monorepo commit (`projects/hipblaslt/...`)
/// applies to a standalone tree with `strip = 2`; a standalone patch to the
/// monorepo with `directory = "projects/hipblaslt"`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Placement {
    pub(crate) strip: usize,
    pub(crate) directory: Option<String>,
}

impl Placement {
    /// `path` placed; `None` when it has no more than `strip` folders.
    pub(crate) fn place(&self, path: &str) -> Option<String> {
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        for _ in 0..self.strip {
            parts.next()?;
        }
        let rest: Vec<&str> = parts.collect();
        if rest.is_empty() {
            return None;
        }
        let rest = rest.join("/");
        Some(match &self.directory {
            Some(dir) => format!("{dir}/{rest}"),
            None => rest,
        })
    }
}

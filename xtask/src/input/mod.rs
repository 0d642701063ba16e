//! What a run is given: recipes and their plan, kernel versions and
//! ranges, where a patch's paths land, the build target, the knowledge
//! files, the workspace and how the tool was invoked. Never touches the
//! network. See `ARCHITECTURE.md` here.

pub(crate) mod invocation;
pub mod kernel;
pub mod knowledge;
pub(crate) mod placement;
pub mod plan;
pub(crate) mod range;
pub mod recipe;
pub mod target;
pub mod workspace;

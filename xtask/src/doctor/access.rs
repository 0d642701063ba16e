//! Access to the GPU devices a ROCm program opens: `/dev/kfd` and the AMD
//! render nodes (`/dev/dri/renderD*`) exist and the user can open them
//! read-write (as owner, through the `render` or `video` group, or for you
//! at `/` as access(2) says, ACLs included), and whether this is a
//! container started without them; each problem with the command that
//! fixes it. Stat only, through [`super::fsread`]: never opens a device.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::path::Path;

use serde::Serialize;

use super::fsread::{self, Kind, Owner, Root};

/// Whom device access is judged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who<'a> {
    /// The user running doctor, on this machine (`--root /`).
    You,
    /// A user of the machine's `/etc/passwd` (`--user NAME`).
    User(&'a str),
    /// Nobody: a machine copy without `--user` (devices listed only).
    Nobody,
}

/// The GPU devices and whether the user can use them.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Access {
    /// Whom it was judged for (`alice (uid 1000)`); `None`: nobody.
    pub(crate) user: Option<String>,
    pub(crate) devices: Vec<Device>,
    /// Why this looks like a container (`/.dockerenv`), when it does.
    pub(crate) container: Option<String>,
    pub(crate) problems: Vec<Problem>,
}

/// One device node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Device {
    pub(crate) path: String,
    /// As `ls -l` shows it (`crw-rw----`); `None` when it does not exist.
    pub(crate) mode: Option<String>,
    pub(crate) owner: Option<String>,
    pub(crate) group: Option<String>,
    /// Whether the user can open it read-write; `None`: not judged.
    pub(crate) usable: Option<bool>,
    /// Why it is usable (`group render`, `owner`, `root`, `an ACL`).
    pub(crate) how: Option<String>,
    /// The group that owns it, as a number.
    #[serde(skip)]
    pub(crate) gid: Option<u32>,
}

/// Something that keeps ROCm from the GPU, and what fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Problem {
    pub(crate) what: String,
    pub(crate) fix: String,
}

/// A user as the machine's account files and (for you) the kernel know it.
struct Identity {
    name: Option<String>,
    uid: u32,
    /// Groups in effect (for you: this process's).
    gids: BTreeSet<u32>,
    /// Groups the account files give it (for you, maybe not yet in effect).
    listed: BTreeSet<u32>,
    live: bool,
}

/// The machine's accounts: `/etc/passwd` and `/etc/group` below the root.
struct Accounts {
    passwd: String,
    group: String,
}

impl Accounts {
    fn read(fs: &Root) -> Accounts {
        // read lossily: one byte that is not UTF-8 (a Latin-1 name) must
        // not hide every account
        let text = |p: &str| {
            fs.read(Path::new(p), fsread::SMALL)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        Accounts {
            passwd: text("etc/passwd"),
            group: text("etc/group"),
        }
    }

    /// (name, uid, primary gid) of the `passwd` line `pick` chooses.
    fn user(&self, pick: impl Fn(&str, u32) -> bool) -> Option<(String, u32, u32)> {
        self.passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let (uid, gid) = (f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?);
            pick(f[0], uid).then(|| (f[0].to_owned(), uid, gid))
        })
    }

    /// Every group (gid, name, members) of `/etc/group`.
    fn groups(&self) -> impl Iterator<Item = (u32, &str, Vec<&str>)> {
        self.group.lines().filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let gid = f.get(2)?.parse().ok()?;
            let members = f.get(3).map_or(Vec::new(), |m| m.split(',').collect());
            Some((gid, f[0], members))
        })
    }

    fn group_name(&self, gid: u32) -> String {
        self.groups()
            .find(|(g, _, _)| *g == gid)
            .map_or(gid.to_string(), |(_, n, _)| n.to_owned())
    }

    fn user_name(&self, uid: u32) -> String {
        self.user(|_, u| u == uid)
            .map_or(uid.to_string(), |(n, _, _)| n)
    }

    /// The groups the account files give `name` (its primary one too).
    fn listed(&self, name: &str, primary: u32) -> BTreeSet<u32> {
        let mut gids: BTreeSet<u32> = self
            .groups()
            .filter(|(_, _, members)| members.contains(&name))
            .map(|(g, _, _)| g)
            .collect();
        gids.insert(primary);
        gids
    }
}

/// Reads the devices below `root` and judges them for `who`. `amd_gpu`:
/// the machine has one (KFD topology, amdgpu loaded): then missing devices
/// are problems.
pub(crate) fn read(root: &Path, who: Who, amd_gpu: bool) -> Access {
    let fs = Root::new(root);
    let accounts = Accounts::read(&fs);
    let mut access = Access {
        container: container(&fs),
        ..Access::default()
    };
    let id = match identity(&accounts, who) {
        Ok(id) => id,
        Err(problem) => {
            access.problems.extend(problem);
            None
        }
    };
    access.user = id.as_ref().map(|i| match &i.name {
        Some(n) => format!("{n} (uid {})", i.uid),
        None => format!("uid {}", i.uid),
    });
    let mut paths = vec!["/dev/kfd".to_owned()];
    paths.extend(render_nodes(&fs));
    for path in &paths {
        access
            .devices
            .push(device(&fs, &accounts, id.as_ref(), path, root));
    }
    let amd_gpu = amd_gpu || paths.len() > 1;
    access
        .problems
        .extend(problems(&access, amd_gpu, id.as_ref()));
    access
}

fn identity(accounts: &Accounts, who: Who) -> Result<Option<Identity>, Option<Problem>> {
    match who {
        Who::Nobody => Ok(None),
        Who::User(name) => {
            let Some((name, uid, gid)) = accounts.user(|n, _| n == name) else {
                return Err(Some(Problem {
                    what: format!(
                        "no user {name} in the machine's /etc/passwd: device access not judged"
                    ),
                    fix: "give --user a user of that machine".to_owned(),
                }));
            };
            let listed = accounts.listed(&name, gid);
            Ok(Some(Identity {
                name: Some(name),
                uid,
                gids: listed.clone(),
                listed,
                live: false,
            }))
        }
        Who::You => {
            // SAFETY: getuid/getegid cannot fail; getgroups fills at most
            // the buffer's length.
            let (uid, egid) = unsafe { (libc::getuid(), libc::getegid()) };
            let mut groups = vec![0 as libc::gid_t; 1024];
            let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
            let mut gids: BTreeSet<u32> = groups[..n.max(0) as usize].iter().copied().collect();
            gids.insert(egid);
            let user = accounts.user(|_, u| u == uid);
            let listed = user
                .as_ref()
                .map_or(gids.clone(), |(n, _, g)| accounts.listed(n, *g));
            Ok(Some(Identity {
                name: user.map(|(n, _, _)| n),
                uid,
                gids,
                listed,
                live: true,
            }))
        }
    }
}

/// The render nodes of AMD GPUs (`/dev/dri/renderD128`); a node whose
/// vendor cannot be read is kept.
fn render_nodes(fs: &Root) -> Vec<String> {
    let Ok(entries) = fs.list(Path::new("dev/dri")) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|e| e.name.into_string().ok())
        .filter(|n| n.starts_with("renderD"))
        .filter(|n| {
            let vendor = format!("sys/class/drm/{n}/device/vendor");
            fs.read_text(Path::new(&vendor), fsread::LINE)
                .map_or(true, |v| v.trim() == "0x1002")
        })
        .map(|n| format!("/dev/dri/{n}"))
        .collect()
}

/// Why this looks like a container, if it does.
fn container(fs: &Root) -> Option<String> {
    for marker in ["/.dockerenv", "/run/.containerenv"] {
        if fs.meta(Path::new(marker)).is_ok() {
            return Some(marker.to_owned());
        }
    }
    let cgroup = fs
        .read_text(Path::new("proc/1/cgroup"), fsread::SMALL)
        .unwrap_or_default();
    ["docker", "kubepods", "libpod", "containerd", "lxc"]
        .iter()
        .any(|w| cgroup.contains(w))
        .then(|| "/proc/1/cgroup".to_owned())
}

fn device(
    fs: &Root,
    accounts: &Accounts,
    id: Option<&Identity>,
    path: &str,
    root: &Path,
) -> Device {
    let Ok(owner) = fs.owner(Path::new(path)) else {
        return Device {
            path: path.to_owned(),
            mode: None,
            owner: None,
            group: None,
            usable: None,
            how: None,
            gid: None,
        };
    };
    let (usable, how) = match id {
        Some(id) if owner.kind == Kind::CharDevice => judge(id, owner, accounts, root, path),
        Some(_) => (
            Some(false),
            Some(format!("is {}, not a device", owner.kind.describe())),
        ),
        None => (None, None),
    };
    Device {
        path: path.to_owned(),
        mode: Some(mode_string(owner)),
        owner: Some(accounts.user_name(owner.uid)),
        group: Some(accounts.group_name(owner.gid)),
        usable,
        how,
        gid: Some(owner.gid),
    }
}

/// Whether `id` can open the device read-write, and through what.
fn judge(
    id: &Identity,
    o: Owner,
    accounts: &Accounts,
    root: &Path,
    path: &str,
) -> (Option<bool>, Option<String>) {
    let by_mode = if id.uid == 0 {
        Some("root".to_owned())
    } else if id.uid == o.uid && o.mode & 0o600 == 0o600 {
        Some("owner".to_owned())
    } else if id.gids.contains(&o.gid) && o.mode & 0o060 == 0o060 {
        Some(format!("group {}", accounts.group_name(o.gid)))
    } else if o.mode & 0o006 == 0o006 {
        Some("everyone may".to_owned())
    } else {
        None
    };
    if id.live && root == Path::new("/") {
        let Ok(c) = CString::new(path) else {
            return (None, None);
        };
        // SAFETY: a NUL-terminated path; access(2) opens nothing.
        let ok = unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) } == 0;
        let how = by_mode.or_else(|| ok.then(|| "an ACL".to_owned()));
        return (Some(ok), how.filter(|_| ok));
    }
    (Some(by_mode.is_some()), by_mode)
}

/// `crw-rw----` for a character device of mode 0660.
fn mode_string(o: Owner) -> String {
    let kind = match o.kind {
        Kind::CharDevice => 'c',
        Kind::BlockDevice => 'b',
        Kind::Dir => 'd',
        Kind::Fifo => 'p',
        Kind::Socket => 's',
        Kind::Symlink => 'l',
        Kind::File => '-',
    };
    let mut s = String::from(kind);
    for shift in [6, 3, 0] {
        let bits = (o.mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

impl Access {
    /// The report's lines, as (key, text): each device, whom it was judged
    /// for, a container, each problem and its fix.
    pub(crate) fn lines(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (i, d) in self.devices.iter().enumerate() {
            let key = if i == 0 { "devices" } else { "" };
            let Some(mode) = &d.mode else {
                out.push((key, format!("{} does not exist", d.path)));
                continue;
            };
            let owner = d.owner.as_deref().unwrap_or("?");
            let group = d.group.as_deref().unwrap_or("?");
            let verdict = match (d.usable, &d.how) {
                (Some(true), Some(how)) => format!(": usable ({how})"),
                (Some(true), None) => ": usable".to_owned(),
                (Some(false), _) => ": not usable".to_owned(),
                (None, _) => String::new(),
            };
            out.push((key, format!("{} {mode} {owner}:{group}{verdict}", d.path)));
        }
        match &self.user {
            Some(user) => out.push(("access", format!("judged for {user}"))),
            None => out.push((
                "access",
                "not judged below --root: give --user NAME, a user of that machine".to_owned(),
            )),
        }
        if let Some(hint) = &self.container {
            out.push(("container", format!("yes ({hint})")));
        }
        for p in &self.problems {
            out.push(("problem", p.what.clone()));
            out.push(("", format!("fix: {}", p.fix)));
        }
        out
    }
}

/// What `docker run` / `podman run` needs for ROCm.
const CONTAINER_FIX: &str =
    "start the container with --device=/dev/kfd --device=/dev/dri (docker run or podman run)";
const MODPROBE_FIX: &str = "sudo modprobe amdgpu (sudo dmesg tells why when it fails)";

/// What keeps ROCm from the GPU, each with its fix; devices the same fix
/// opens are named together.
fn problems(a: &Access, amd_gpu: bool, id: Option<&Identity>) -> Vec<Problem> {
    let mut out = Vec::new();
    let no_kfd = a.devices[0].mode.is_none();
    let no_render = a.devices.len() == 1;
    match &a.container {
        Some(hint) if amd_gpu && (no_kfd || no_render) => out.push(Problem {
            what: format!(
                "this is a container ({hint}) started without the GPU devices (/dev/kfd, /dev/dri/renderD*)"
            ),
            fix: CONTAINER_FIX.to_owned(),
        }),
        None if amd_gpu && no_kfd => out.push(Problem {
            what: "/dev/kfd does not exist: amdgpu is not loaded, or the kernel has no KFD (CONFIG_HSA_AMD)"
                .to_owned(),
            fix: MODPROBE_FIX.to_owned(),
        }),
        None if amd_gpu && no_render => out.push(Problem {
            what: "no /dev/dri/renderD* of an AMD GPU".to_owned(),
            fix: MODPROBE_FIX.to_owned(),
        }),
        _ => {}
    }
    let Some(id) = id else {
        return out;
    };
    let mut by_fix: std::collections::BTreeMap<String, Vec<&Device>> = Default::default();
    for d in a.devices.iter().filter(|d| d.usable == Some(false)) {
        by_fix.entry(fix(id, d)).or_default().push(d);
    }
    let who = a.user.clone().unwrap_or_else(|| "this user".to_owned());
    for (fix, devices) in by_fix {
        let names: Vec<String> = devices
            .iter()
            .map(|d| {
                let mode = d.mode.as_deref().unwrap_or("?");
                let owner = d.owner.as_deref().unwrap_or("?");
                let group = d.group.as_deref().unwrap_or("?");
                format!("{} ({mode} {owner}:{group})", d.path)
            })
            .collect();
        out.push(Problem {
            what: format!("{who} cannot open {} read-write", names.join(", ")),
            fix,
        });
    }
    out
}

/// What lets `id` open device `d`.
fn fix(id: &Identity, d: &Device) -> String {
    let name = id.name.clone().unwrap_or_else(|| "$USER".to_owned());
    let mode = d.mode.as_deref().unwrap_or("");
    if !mode.starts_with('c') {
        return format!(
            "{} is no device node here: the machine's /dev is not the kernel's (devtmpfs and udev make it)",
            d.path
        );
    }
    let group_rw = mode.get(4..6) == Some("rw");
    let group = d.group.as_deref().unwrap_or("render");
    match d.gid {
        Some(gid) if group_rw && id.live && id.listed.contains(&gid) && !id.gids.contains(&gid) => format!(
            "log out and in again: {name} is in {group} since this session began (or run `newgrp {group}` in this shell)"
        ),
        _ if group_rw => {
            format!("sudo usermod -aG render,video {name}, then log out and in again")
        }
        _ => format!(
            "have udev give {} to the render group with mode 0660 (a rule with GROUP=\"render\", MODE=\"0660\"), then sudo usermod -aG render,video {name} and log in again",
            d.path
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_like_ls() {
        let o = Owner {
            kind: Kind::CharDevice,
            mode: 0o660,
            uid: 0,
            gid: 0,
        };
        assert_eq!(mode_string(o), "crw-rw----");
    }
}

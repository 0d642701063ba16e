//! The key a repository is signed with: GnuPG run as a process (`gpg`
//! from PATH, the user's `GNUPGHOME` or `--gnupghome`), every signature
//! made at one fixed time (`--faked-system-time`), so the same inputs and
//! key give the same signatures wherever the key's algorithm is
//! deterministic (EdDSA, RSA; ECDSA is not).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::shared::diag::UsageError;
use crate::shared::settings::Environment;

/// A secret key that can sign, found in a GnuPG home.
#[derive(Debug, Clone)]
pub(crate) struct Signer {
    gpg: PathBuf,
    home: Option<PathBuf>,
    /// The primary key's fingerprint (40 hex digits for a v4 key).
    pub(crate) fingerprint: String,
    /// Its first user id, as gpg prints it (`Name <address>`).
    pub(crate) uid: String,
    /// When the newest of its signing keys was made: no signature may be
    /// older than its key.
    pub(crate) created: i64,
    /// The time every signature carries.
    time: i64,
    /// The machine's environment, whose `PATH` holds the signing tools.
    env: Environment,
}

/// Returns once the clock is past `time`, when `time` is this second or
/// the next two (further ahead is a date gpg freezes at without a wait).
fn wait_past(time: i64) {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    };
    while (0..=2).contains(&(time - now().as_secs() as i64)) {
        let into_second = now().subsec_nanos();
        std::thread::sleep(std::time::Duration::from_nanos(
            1_000_000_000 - u64::from(into_second),
        ));
    }
}

/// One key of `gpg --list-secret-keys --with-colons`.
#[derive(Debug, Default)]
struct Listed {
    fingerprint: String,
    uid: Option<String>,
    created: i64,
    can_sign: bool,
    usable: bool,
}

impl Signer {
    /// The key `key` names (a fingerprint, key id or user id gpg takes),
    /// or, when none is named, the one signing key of the GnuPG home; gpg
    /// and the other tools are looked for on `env`'s `PATH`.
    pub(crate) fn find(
        home: Option<&Path>,
        key: Option<&str>,
        env: &Environment,
    ) -> Result<Signer> {
        let gpg = env.which("gpg").ok_or_else(|| {
            UsageError(
                "gpg is not installed: install gnupg (apt-get install gnupg, dnf install gnupg2, \
                 pacman -S gnupg), then run again"
                    .to_owned(),
            )
        })?;
        let mut signer = Signer {
            gpg,
            home: home.map(Path::to_path_buf),
            fingerprint: String::new(),
            uid: String::new(),
            created: 0,
            time: 0,
            env: env.clone(),
        };
        let mut list = signer.command();
        list.args(["--with-colons", "--fixed-list-mode", "--list-secret-keys"]);
        if let Some(key) = key {
            list.arg("--").arg(key);
        }
        let out = list.output().context("running gpg --list-secret-keys")?;
        let keys: Vec<Listed> = parse_listing(&String::from_utf8_lossy(&out.stdout))
            .into_iter()
            .filter(|k| k.can_sign && k.usable)
            .collect();
        let chosen = signer.choose(key, keys)?;
        signer.fingerprint = chosen.fingerprint;
        signer.created = chosen.created;
        signer.uid = chosen.uid.unwrap_or_default();
        Ok(signer)
    }

    fn choose(&self, key: Option<&str>, mut keys: Vec<Listed>) -> Result<Listed> {
        let home = self.home_text();
        match (keys.len(), key) {
            (1, _) => Ok(keys.remove(0)),
            (0, Some(key)) => bail!(UsageError(format!(
                "no secret key that can sign matches `{key}` in {home}: `gpg --list-secret-keys` \
                 lists the keys there; name one with --key, or point --gnupghome (GNUPGHOME) at \
                 the folder that holds it"
            ))),
            (0, None) => bail!(UsageError(format!(
                "{home} holds no secret key that can sign: make one with `gpg --quick-gen-key \
                 'Your Name <you@example.org>' default sign never`, or point --gnupghome \
                 (GNUPGHOME) at the folder that holds yours"
            ))),
            (_, _) => {
                let names: Vec<_> = keys.iter().map(|k| k.fingerprint.as_str()).collect();
                bail!(UsageError(format!(
                    "{} signing keys in {home} match ({}): name one by its fingerprint with --key",
                    keys.len(),
                    names.join(", ")
                )))
            }
        }
    }

    fn home_text(&self) -> String {
        match &self.home {
            Some(home) => format!("the GnuPG home {}", home.display()),
            None => "the GnuPG home (GNUPGHOME, else ~/.gnupg)".to_owned(),
        }
    }

    /// This signer with every signature made at `time`, or at the key's
    /// creation when `time` is older.
    ///
    /// gpg takes a faked time that equals the clock's current second as no
    /// faked time at all and lets its clock run (gnupg's `gnupg_set_time`),
    /// so a signature dated this very second (a key made just now) could
    /// carry the next one: the publication waits for that second to pass.
    pub(crate) fn at(mut self, time: i64) -> Signer {
        self.time = time.max(self.created);
        wait_past(self.time);
        self
    }

    /// The time every signature carries.
    pub(crate) fn time(&self) -> i64 {
        self.time
    }

    /// The gpg program (rpmsign is told to run the same one).
    pub(crate) fn gpg(&self) -> &Path {
        &self.gpg
    }

    /// The GnuPG home it reads, when one was named.
    pub(crate) fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The argument gpg takes to sign at [`Signer::time`].
    pub(crate) fn faked_time_arg(&self) -> String {
        format!("--faked-system-time={}!", self.time)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.gpg);
        cmd.args(["--batch", "--no-tty", "--no-auto-key-locate"]);
        if let Some(home) = &self.home {
            cmd.arg("--homedir").arg(home);
        }
        cmd.env("LC_ALL", "C.UTF-8");
        cmd
    }

    fn signing(&self) -> Command {
        let mut cmd = self.command();
        cmd.arg(self.faked_time_arg())
            .arg("--local-user")
            .arg(&self.fingerprint)
            .args(["--output", "-"]);
        cmd
    }

    /// `text` in a clear-signed message (`InRelease`, a signed `.dsc` or
    /// `.changes`).
    pub(crate) fn clearsign(&self, text: &[u8], what: &str) -> Result<Vec<u8>> {
        let mut cmd = self.signing();
        cmd.arg("--clearsign");
        run_with_input(cmd, text, &format!("clear-signing {what}"))
    }

    /// A detached signature of the file at `path`: ASCII-armored
    /// (`Release.gpg`, `repomd.xml.asc`) or binary (pacman's `.sig`).
    pub(crate) fn detach_file(&self, path: &Path, armor: bool) -> Result<Vec<u8>> {
        let mut cmd = self.signing();
        if armor {
            cmd.arg("--armor");
        }
        cmd.arg("--detach-sign").arg("--").arg(path);
        run_with_input(cmd, b"", &format!("signing {}", path.display()))
    }

    /// The public key (primary key, subkeys and self-signatures only),
    /// ASCII-armored or binary.
    pub(crate) fn public_key(&self, armor: bool) -> Result<Vec<u8>> {
        let mut cmd = self.command();
        if armor {
            cmd.arg("--armor");
        }
        cmd.args(["--export-options", "export-minimal", "--export"])
            .arg(&self.fingerprint);
        let key = run_with_input(cmd, b"", "exporting the public key")?;
        if key.is_empty() {
            bail!("gpg exported nothing for {}", self.fingerprint);
        }
        Ok(key)
    }
}

/// Runs `cmd` with `input` on stdin; its stdout, or an error with what
/// gpg said.
fn run_with_input(mut cmd: Command, input: &[u8], what: &str) -> Result<Vec<u8>> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("{what}: running gpg"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child
        .wait_with_output()
        .with_context(|| format!("{what}: running gpg"))?;
    let fed = feeder.join().expect("the stdin thread does not panic");
    if !out.status.success() {
        bail!(
            "{what}: gpg failed ({}): {}",
            out.status,
            crate::shared::report::safe(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    fed.with_context(|| format!("{what}: writing to gpg"))?;
    Ok(out.stdout)
}

/// The keys of a `--with-colons` listing of secret keys.
fn parse_listing(text: &str) -> Vec<Listed> {
    let mut keys: Vec<Listed> = Vec::new();
    let mut last_record = "";
    for line in text.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        let field = |i: usize| fields.get(i).copied().unwrap_or("");
        match field(0) {
            "sec" => keys.push(Listed {
                created: field(5).parse().unwrap_or(0),
                can_sign: field(11).contains('S'),
                usable: !matches!(field(1), "e" | "r" | "d" | "i" | "n"),
                ..Listed::default()
            }),
            "ssb" if field(11).contains('s') && !matches!(field(1), "e" | "r") => {
                if let Some(key) = keys.last_mut() {
                    key.created = key.created.max(field(5).parse().unwrap_or(0));
                }
            }
            "fpr" if last_record == "sec" => {
                if let Some(key) = keys.last_mut() {
                    key.fingerprint = field(9).to_owned();
                }
            }
            "uid" => {
                if let Some(key) = keys.last_mut().filter(|k| k.uid.is_none()) {
                    key.uid = Some(unescape(field(9)));
                }
            }
            _ => {}
        }
        if !fields.is_empty() && field(0) != "grp" {
            last_record = match field(0) {
                "fpr" => last_record,
                other => other,
            };
        }
    }
    keys
}

/// gpg's `--with-colons` escapes (`\x3a` for `:`) decoded.
fn unescape(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 2..i + 4)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (
            bytes[i],
            bytes.get(i + 1),
            hex.map(|h| u8::from_str_radix(h, 16)),
        ) {
            (b'\\', Some(b'x'), Some(Ok(b))) => {
                out.push(b);
                i += 4;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Signer {
    /// The first `program` on the machine's `PATH`.
    pub(crate) fn which(&self, program: &str) -> Option<PathBuf> {
        self.env.which(program)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "\
sec:u:255:22:F0EEC75724867562:1795752694:::u:::scSC:::+::ed25519:::0:
fpr:::::::::301EF1DCEBD1DFC711DD2EA7F0EEC75724867562:
grp:::::::::C87D66A7487105BF8CA3861D01F057C022103AE3:
uid:u::::1795752694::782F::Test Repo \\x3a one <repo@test.invalid>::::::::::0:
ssb:u:255:18:AAAA:1795752800::::::s:::+::cv25519:
fpr:::::::::1111111111111111111111111111111111111111:
sec:e:255:22:BBBB:1600000000:::u:::scSC:::+::ed25519:::0:
fpr:::::::::2222222222222222222222222222222222222222:
sec:u:255:22:CCCC:1600000000:::u:::eE:::+::cv25519:::0:
fpr:::::::::3333333333333333333333333333333333333333:
";

    #[test]
    fn a_listing_gives_fingerprints_uids_and_the_newest_signing_key() {
        let keys = parse_listing(LISTING);
        assert_eq!(keys.len(), 3);
        assert_eq!(
            keys[0].fingerprint,
            "301EF1DCEBD1DFC711DD2EA7F0EEC75724867562"
        );
        assert_eq!(
            keys[0].uid.as_deref(),
            Some("Test Repo : one <repo@test.invalid>")
        );
        assert_eq!(keys[0].created, 1795752800, "the signing subkey is newer");
        assert!(keys[0].can_sign && keys[0].usable);
        assert!(!keys[1].usable, "expired");
        assert!(!keys[2].can_sign, "encryption only");
        assert_eq!(
            keys[2].fingerprint,
            "3333333333333333333333333333333333333333"
        );
    }
}

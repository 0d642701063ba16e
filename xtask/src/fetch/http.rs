//! HTTP(S) downloads into the cache: streamed to `tmp/`, hashed while
//! streaming, moved into `sha256/` only when the hash is the pinned one.
//! Timeouts, an overall deadline per download and a minimum rate, bounded
//! retries with backoff, a size cap and a redirect policy that follows http
//! and https only. A failed download leaves nothing in `tmp/`: the partial
//! file is removed with the attempt, whichever way it ends.

use std::cell::Cell;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::fetch::cache::Cache;
use crate::shared::report::Reporter;

pub(crate) use crate::shared::settings::HttpConfig;

/// A verified download in the cache.
#[derive(Debug, Clone)]
pub(crate) struct Downloaded {
    pub(crate) path: PathBuf,
    pub(crate) sha256: String,
    pub(crate) bytes: u64,
}

/// The HTTP client with its runtime. Building one is the first network
/// action of a run, so `--offline` never builds one.
pub(crate) struct Http {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    config: HttpConfig,
}

/// Why one attempt failed, and whether another could succeed.
enum Failure {
    Retry(String),
    Fatal(String),
}

static CRYPTO: Once = Once::new();

impl Http {
    pub(crate) fn new(config: HttpConfig) -> Result<Http> {
        CRYPTO.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime for HTTP downloads")?;
        let max = config.max_redirects;
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            let scheme = attempt.url().scheme().to_owned();
            if !matches!(scheme.as_str(), "http" | "https") {
                let to = attempt.url().to_string();
                attempt.error(format!(
                    "refusing a redirect to `{to}`: only http and https redirects are followed"
                ))
            } else if attempt.previous().len() > max {
                attempt.error(format!("more than {max} redirects"))
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .redirect(policy)
            .user_agent(concat!("rocm-patchkit/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("building the HTTP client")?;
        Ok(Http {
            runtime,
            client,
            config,
        })
    }

    /// Downloads `url` into the cache. With `expected`, the bytes must hash
    /// to it or nothing is cached; without, the hash found is returned (for
    /// `lock` and `--allow-unpinned`). Stops at the deadline, retries and
    /// waits included.
    pub(crate) fn download(
        &self,
        cache: &Cache,
        url: &str,
        expected: Option<&str>,
        reporter: &Reporter,
    ) -> Result<Downloaded> {
        let attempts = self.config.attempts;
        let deadline = Instant::now() + self.config.deadline;
        let received = Cell::new(0u64);
        let late = |last: &str| {
            anyhow::anyhow!(
                "downloading {url} stopped at its deadline of {:.1} s ({}); nothing was cached. \
                 On a slow link, raise PATCHKIT_HTTP_DEADLINE_MS",
                self.config.deadline.as_secs_f64(),
                if last.is_empty() {
                    format!("{} bytes of the last attempt received", received.get())
                } else {
                    format!("no time left to retry after: {last}")
                }
            )
        };
        let mut last = String::new();
        for attempt in 1..=attempts {
            received.set(0);
            let run = self.attempt(cache, url, expected, reporter, &received);
            // A deadline drops the attempt, and with it its partial file.
            let timed = async { tokio::time::timeout_at(deadline.into(), run).await };
            match self.runtime.block_on(timed) {
                Err(_elapsed) => return Err(late("")),
                Ok(Ok(done)) => return Ok(done),
                Ok(Err(Failure::Fatal(why))) => anyhow::bail!("downloading {url}: {why}"),
                Ok(Err(Failure::Retry(why))) => {
                    last = why;
                    if attempt < attempts {
                        let wait = self.config.backoff * 2u32.pow(attempt - 1);
                        if Instant::now() + wait >= deadline {
                            return Err(late(&last));
                        }
                        reporter.step(format!(
                            "  {url}: {last}; retrying in {:.1}s (attempt {} of {attempts})",
                            wait.as_secs_f64(),
                            attempt + 1
                        ));
                        std::thread::sleep(wait);
                    }
                }
            }
        }
        anyhow::bail!(
            "downloading {url} failed after {attempts} attempts: {last}; nothing was cached. \
             Check the URL and the network, then run the command again"
        )
    }

    async fn attempt(
        &self,
        cache: &Cache,
        url: &str,
        expected: Option<&str>,
        reporter: &Reporter,
        received: &Cell<u64>,
    ) -> Result<Downloaded, Failure> {
        let read_timeout = self.config.read_timeout;
        let mut response = tokio::time::timeout(read_timeout, self.client.get(url).send())
            .await
            .map_err(|_| timed_out(read_timeout))?
            .map_err(classify)?;
        check_status(&response)?;
        let max = self.config.max_bytes;
        let length = response.content_length();
        if let Some(len) = length.filter(|&len| len > max) {
            return Err(Failure::Fatal(too_big(len, max)));
        }
        let mut tmp = cache.tmp_file().map_err(fatal)?;
        let label = url.rsplit('/').find(|s| !s.is_empty()).unwrap_or(url);
        let mut progress = reporter.progress(format!("download {label}"), length, true);
        let (total, actual) = self
            .body(&mut response, &mut tmp, &mut progress, received)
            .await?;
        progress.finish();
        if let Some(len) = length.filter(|&len| len != total) {
            return Err(Failure::Retry(format!(
                "the body was truncated: {total} of {len} bytes"
            )));
        }
        if let Some(expected) = expected.filter(|e| *e != actual) {
            return Err(Failure::Fatal(format!(
                "sha256 mismatch: expected {expected}, got {actual}; nothing was cached. \
                 If upstream changed the file on purpose, review it, then remove the old \
                 `sha256` from the recipe and run `cargo xtask lock <recipe>`"
            )));
        }
        let path = match cache.blob(&actual) {
            Some(path) => path,
            None => cache.admit(tmp, &actual).map_err(fatal)?,
        };
        Ok(Downloaded {
            path,
            sha256: actual,
            bytes: total,
        })
    }

    /// The response's body written to `tmp`, hashed as it comes, within the
    /// read timeout, the least rate and the most bytes; returns its size
    /// and sha256.
    async fn body(
        &self,
        response: &mut reqwest::Response,
        tmp: &mut tempfile::NamedTempFile,
        progress: &mut crate::shared::report::Progress,
        received: &Cell<u64>,
    ) -> Result<(u64, String), Failure> {
        let (read_timeout, max) = (self.config.read_timeout, self.config.max_bytes);
        let mut hasher = crate::shared::hash::Hasher::new();
        let mut total = 0u64;
        let mut rate = Rate::new(self.config.min_rate, read_timeout);
        loop {
            let chunk = tokio::time::timeout(read_timeout, response.chunk())
                .await
                .map_err(|_| timed_out(read_timeout))?
                .map_err(|e| {
                    Failure::Retry(format!(
                        "the connection broke after {total} bytes ({})",
                        chain(&e)
                    ))
                })?;
            let Some(chunk) = chunk else { break };
            total += chunk.len() as u64;
            received.set(total);
            rate.check(chunk.len() as u64).map_err(Failure::Retry)?;
            if total > max {
                return Err(Failure::Fatal(too_big(total, max)));
            }
            hasher.update(&chunk);
            tmp.write_all(&chunk)
                .with_context(|| format!("writing {}", tmp.path().display()))
                .map_err(fatal)?;
            progress.inc(chunk.len() as u64);
        }
        Ok((total, hasher.hex()))
    }
}

fn timed_out(read_timeout: Duration) -> Failure {
    Failure::Retry(format!(
        "no data for {} ms (read timeout)",
        read_timeout.as_millis()
    ))
}

fn fatal(e: anyhow::Error) -> Failure {
    Failure::Fatal(format!("{e:#}"))
}

/// A redirect reqwest did not follow, a server error (retried) or a client
/// error (not retried) as the attempt's failure.
fn check_status(response: &reqwest::Response) -> Result<(), Failure> {
    let status = response.status();
    if status.is_redirection() {
        // reqwest hands back, unfollowed, a redirect to a URL it cannot
        // fetch (file://, data:, ...): say so rather than "client error".
        let to = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let scheme = response
            .url()
            .join(&to)
            .map(|u| u.scheme().to_owned())
            .unwrap_or_else(|_| "an invalid".to_owned());
        return Err(Failure::Fatal(format!(
            "redirect to a {scheme}:// URL refused ({status} to `{to}`): only http and https \
             redirects are followed; ask the server's owner, or point the recipe at the final \
             http(s) URL"
        )));
    }
    if status.is_server_error() {
        return Err(Failure::Retry(format!("the server answered {status}")));
    }
    if !status.is_success() {
        return Err(Failure::Fatal(format!(
            "the server answered {status}; check the URL (no retry for a client error)"
        )));
    }
    Ok(())
}

/// The body's rate over windows of one read timeout: a window that
/// brought fewer than `min` bytes a second fails the attempt.
struct Rate {
    min: u64,
    window: Duration,
    start: Instant,
    bytes: u64,
}

impl Rate {
    fn new(min: u64, window: Duration) -> Rate {
        Rate {
            min,
            window,
            start: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `n` more bytes; at the end of a window, checks its rate.
    fn check(&mut self, n: u64) -> Result<(), String> {
        self.bytes += n;
        let spent = self.start.elapsed();
        if spent < self.window {
            return Ok(());
        }
        let needed = (self.min as f64 * spent.as_secs_f64()) as u64;
        if self.bytes < needed {
            return Err(format!(
                "the server sent {} bytes in {:.1} s, below the minimum rate of {} bytes/s \
                 (PATCHKIT_HTTP_MIN_RATE)",
                self.bytes,
                spent.as_secs_f64(),
                self.min
            ));
        }
        self.start = Instant::now();
        self.bytes = 0;
        Ok(())
    }
}

fn too_big(len: u64, max: u64) -> String {
    format!(
        "the download is {len} bytes or more, above the limit of {max} bytes \
         (raise it with PATCHKIT_HTTP_MAX_BYTES if this is expected)"
    )
}

fn classify(e: reqwest::Error) -> Failure {
    let why = chain(&e);
    if e.is_redirect() || e.is_builder() {
        Failure::Fatal(why)
    } else {
        Failure::Retry(why)
    }
}

/// An error with its sources, `outer: inner: innermost`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

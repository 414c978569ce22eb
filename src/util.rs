//! Small helpers shared by every module: paths for messages, time, names, hashes.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The plural ending of a count in a message: `""` for 1, else `"s"`.
pub fn plural<N: PartialEq + From<u8>>(n: N) -> &'static str {
    if n == N::from(1) { "" } else { "s" }
}

/// A path as shown in messages: relative to the current directory when under it.
pub fn display_path(path: &Path) -> String {
    if let Ok(cwd) = std::env::current_dir()
        && let Ok(rel) = path.strip_prefix(&cwd)
        && !rel.as_os_str().is_empty()
    {
        return rel.display().to_string();
    }
    path.display().to_string()
}

/// CPU time (user + system) this process has used, in milliseconds.
pub fn self_cpu_ms() -> u64 {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_SELF needs nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// An RFC 3339 timestamp (UTC, milliseconds: `2026-03-01T12:00:00.123Z`) for a time in
/// ms since the epoch. Fixed width, so timestamps compare as strings; milliseconds, so the
/// journal's start and end times draw a timeline of sub-second projects (`strata report`).
pub fn rfc3339(ms: u64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(t).to_string()
}

/// A duration for people: `850ms`, `4.2s`, `3m05s`.
pub fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// The environment-variable form of a key: upper-cased, every character that is not
/// ASCII alphanumeric as `_` (`lab:token` -> `LAB_TOKEN`).
pub fn env_key(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The file-system name of a project path, for per-project state (outputs, work dirs,
/// config copies). Injective, so two projects never share a file: ASCII letters, digits,
/// `-` and `.` stand for themselves, every other byte is `_` and two hex digits
/// (`x/y` → `x_2fy`, `x-y` → `x-y`, `x_y` → `x_5fy`); `_` only ever starts an escape.
pub fn slug(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || (b == b'.' && !out.is_empty()) {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

/// "Did you mean …?" for a name that is not one of `known`: the closest known name
/// (Jaro-Winkler, as clap suggests subcommands), with the sentence around it, or "".
pub fn did_you_mean<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(wanted, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| format!(" Did you mean `{k}`?"))
        .unwrap_or_default()
}

/// The open-files soft limit strata started with, when it raised it (0: not raised).
static STARTED_WITH_SOFT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The open-files soft limit a child gets: the one strata started with, when strata
/// raised its own (a child is the user's program, run under the user's limits).
pub fn children_open_files_limit() -> Option<u64> {
    Some(STARTED_WITH_SOFT.load(std::sync::atomic::Ordering::SeqCst)).filter(|s| *s != 0)
}

/// At most this many malloc arenas (glibc). Steps run on up to `-j` step threads;
/// glibc gives threads up to 8 arenas per core, each keeping what its threads freed,
/// so a long run's peak memory grew with `-j` and the estate. Steps allocate little:
/// two arenas serve them.
pub const MALLOC_ARENAS: i32 = 2;

/// Blocks of at least this many bytes are mapped apart and unmapped when freed (glibc's
/// `M_MMAP_THRESHOLD`), never left in the heap. Left to glibc, the threshold rises to the
/// largest block freed, and the megabytes a large estate's journal lines and graphs take
/// for a moment stay in the heap, where what is allocated after them keeps the pages.
pub const MALLOC_MMAP_THRESHOLD: i32 = 128 * 1024;

/// Caps glibc's malloc arenas at [`MALLOC_ARENAS`] and fixes its mmap threshold at
/// [`MALLOC_MMAP_THRESHOLD`] (nothing elsewhere). Call it early.
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets tunables of the allocator; any value is valid.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENAS);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
    }
}

/// Gives the pages malloc holds free back to the kernel (glibc's `malloc_trim`): what
/// a run's steps freed, before its report is drawn.
pub fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Open files a run may hold beside its steps (the journal, the lock, the report...).
const OPEN_FILES_BASE: u64 = 256;

/// Open files a running step may hold (its child's pipes, its log, a Pulumi program's
/// files and connections), with room to spare.
const OPEN_FILES_PER_STEP: u64 = 16;

/// Whether a run of `parallel` steps at once may need more open files than `soft`.
fn open_files_short(soft: u64, parallel: usize) -> bool {
    let need = OPEN_FILES_PER_STEP.saturating_mul(parallel as u64);
    soft < OPEN_FILES_BASE.saturating_add(need)
}

/// Raises the open-files soft limit to the hard one when a run of `parallel` steps at
/// once may need more than it allows ([`open_files_short`]: hundreds of steps, each
/// with pipes and a log, can exceed the usual soft 1024); else leaves it. A raised limit
/// is given back to each child ([`children_open_files_limit`]) from a `pre_exec` hook,
/// which makes the standard library fork every child instead of `posix_spawn` it (574
/// against 357 ms for 400 projects at `-j 4`), so it is raised only when needed.
/// Returns the soft limit in force.
pub fn raise_open_files_limit(parallel: usize) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct passed in.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max && open_files_short(lim.rlim_cur, parallel) {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                // Only the first raise is remembered: a later call sees its own.
                let _ = STARTED_WITH_SOFT.compare_exchange(
                    0,
                    lim.rlim_cur.max(1),
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                );
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// `bytes` as lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest as _, Sha256};
    hex(&Sha256::digest(bytes))
}

/// `n` bytes from the kernel's random source.
pub fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut out)?;
    Ok(out)
}

/// This machine's host name ("unknown" when it cannot be read).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The `${…}` placeholders of `text`, in order: where each is, and what is inside (an
/// unclosed `${` is none). Hook commands and a profile's `cluster:` share them.
pub fn placeholders(text: &str) -> impl Iterator<Item = (std::ops::Range<usize>, &str)> {
    let mut from = 0;
    std::iter::from_fn(move || {
        let start = from + text[from..].find("${")?;
        let len = text[start + 2..].find('}')?;
        from = start + 2 + len + 1;
        Some((start..from, &text[start + 2..start + 2 + len]))
    })
}

/// At most `n` of `items`, comma-separated, and how many more: `a, b and 3 more`.
pub fn list_some<T: AsRef<str>>(items: &[T], n: usize) -> String {
    let shown: Vec<&str> = items.iter().take(n).map(AsRef::as_ref).collect();
    match items.len().saturating_sub(n) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// A map of owned strings from `(key, value)` pairs: an environment, labels, in tests.
#[cfg(test)]
pub fn string_map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plural_is_empty_for_one_only() {
        assert_eq!(plural(1usize), "");
        assert_eq!(plural(1u64), "");
        for n in [0usize, 2, 40] {
            assert_eq!(plural(n), "s");
        }
    }

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn env_key_upper_cases_and_replaces_separators() {
        assert_eq!(env_key("lab:token"), "LAB_TOKEN");
        assert_eq!(env_key("my-ns:db-pass.word"), "MY_NS_DB_PASS_WORD");
    }

    #[test]
    fn timestamps_have_milliseconds_and_a_fixed_width() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_709_210_096_789), "2024-02-29T12:34:56.789Z");
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(850), "850ms");
        assert_eq!(human_duration(4200), "4.2s");
        assert_eq!(human_duration(185_000), "3m05s");
    }

    #[test]
    fn slug_is_file_safe_and_keeps_paths_apart() {
        assert_eq!(
            slug("kubernetes/nginx/ingress"),
            "kubernetes_2fnginx_2fingress"
        );
        assert_ne!(slug("x/y"), slug("x-y"));
        assert_ne!(slug("x_y"), slug("x/y"));
        assert_eq!(slug(".."), "_2e.");
        for s in ["a/b", "x-y", "u_v", "..", ".hidden", "ü/ß"] {
            let k = slug(s);
            assert!(
                !k.contains('/') && k != "." && k != ".." && !k.starts_with('.'),
                "{k}"
            );
        }
    }

    proptest::proptest! {
        /// Two different project paths never map to the same file name.
        #[test]
        fn slug_is_injective(a in ".{0,12}", b in ".{0,12}") {
            proptest::prop_assume!(a != b);
            proptest::prop_assert_ne!(slug(&a), slug(&b));
        }
    }

    #[test]
    fn suggests_the_closest_name() {
        assert_eq!(
            did_you_mean("aws2", ["aws", "do", "local"]),
            " Did you mean `aws`?"
        );
        assert_eq!(
            did_you_mean("infra/vcp", ["infra/vpc", "infra/eks"]),
            " Did you mean `infra/vpc`?"
        );
        assert_eq!(did_you_mean("zzz", ["aws", "do"]), "");
    }

    #[test]
    fn the_open_files_limit_is_short_only_for_a_wide_run() {
        assert!(!open_files_short(1024, 4));
        assert!(!open_files_short(1024, 48));
        assert!(open_files_short(1024, 49));
        assert!(open_files_short(256, 1));
        assert!(!open_files_short(u64::MAX, 10_000));
        assert!(open_files_short(u64::MAX - 1, usize::MAX));
    }

    #[test]
    fn open_files_soft_limit_is_raised_to_the_hard_limit() {
        // A run far wider than any limit: raised to the hard limit.
        let soft = raise_open_files_limit(usize::MAX);
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct passed in.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(lim.rlim_cur, lim.rlim_max);
        assert_eq!(soft, lim.rlim_cur);
    }
}

//! The `[policy.NAME]` tables of the config (SPEC 9.2), typed and checked at load: a bad key or
//! value refuses the config with a message naming the table and the key.
//!
//! ```toml
//! [policy.agents]
//! write = ["/srv/work"]        # the writable roots; every other path read-only (absent: all writable)
//! hide = ["/home/me/.ssh"]     # paths a task cannot read at all
//! network = "none"             # or "all" (the default)
//! memory_max = "256M"          # bytes, or a number with K, M, G or T (binary units)
//! pids_max = 64                # processes and threads at once
//! cpu_max = 1.5                # cores
//! run_as = "agent"             # a user name (a host run by root only)
//! max_running = 4              # process tasks of one principal running at once; past it, queued
//! git_writable = false         # `.git` inside writable roots stays read-only
//! private_tmp = false          # true: each task's `/tmp` is an empty tmpfs of its own, writable
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One `[policy.NAME]` table, as written (paths made absolute from the config file's directory).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyTable {
    /// The writable roots; `None`: the filesystem is not bounded beyond `hide`.
    pub write: Option<Vec<PathBuf>>,
    /// Paths a task cannot read.
    #[serde(default)]
    pub hide: Vec<PathBuf>,
    /// Whether tasks may use the network.
    #[serde(default)]
    pub network: Network,
    /// The most memory one task's processes may use together.
    pub memory_max: Option<MemorySize>,
    /// The most processes one task may have at once.
    pub pids_max: Option<u64>,
    /// The most CPU one task may use, in cores.
    pub cpu_max: Option<f64>,
    /// The user the tasks run as.
    pub run_as: Option<String>,
    /// Process tasks of one principal running at once; past it a start is queued (issue 44).
    pub max_running: Option<u64>,
    /// `.git` inside writable roots stays writable.
    #[serde(default)]
    pub git_writable: bool,
    /// `/tmp` is an empty tmpfs of each task's own.
    #[serde(default)]
    pub private_tmp: bool,
}

/// `network`: `"all"` or `"none"`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Every socket family.
    #[default]
    All,
    /// Unix sockets only.
    None,
}

/// `memory_max`: a number of bytes, or a string such as `"256M"` or `"2G"` (binary units).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemorySize(pub u64);

impl<'de> Deserialize<'de> for MemorySize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Bytes(u64),
            Text(String),
        }
        let bytes = match Written::deserialize(d).map_err(|_| {
            serde::de::Error::custom("memory_max is a number of bytes or a string such as \"256M\"")
        })? {
            Written::Bytes(n) => n,
            Written::Text(text) => parse_size(&text).map_err(serde::de::Error::custom)?,
        };
        Ok(Self(bytes))
    }
}

/// `"256M"`, `"2G"`, `"512K"`, `"1T"`, `"1048576"` (an optional `B` or `iB` after the unit).
fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || format!("memory_max {text:?} is not a size such as \"256M\" or \"2G\"");
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(bad()),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

impl PolicyTable {
    /// Makes relative paths absolute from `base` (the config file's directory) and checks the
    /// values serde cannot: the message names the key.
    ///
    /// # Errors
    /// The first bad key, as `KEY: why`.
    pub fn settle(&mut self, base: &Path) -> Result<(), String> {
        for path in self.write.iter_mut().flatten().chain(&mut self.hide) {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
        for root in self.write.iter_mut().flatten() {
            // A task's rules open its roots through no symlink (one nested in another could be
            // swapped for a link by a task): a root named through one is taken by its real path.
            if let Ok(real) = std::fs::canonicalize(&*root) {
                *root = real;
            }
            kernel_free(root)?;
        }
        if self.memory_max.is_some_and(|m| m.0 == 0) {
            return Err("memory_max must be more than 0".into());
        }
        if self.pids_max == Some(0) {
            return Err("pids_max must be at least 1".into());
        }
        if let Some(cores) = self.cpu_max
            && !(cores.is_finite() && (0.001..=1_000_000.0).contains(&cores))
        {
            return Err(format!(
                "cpu_max must be a number of cores of at least 0.001, got {cores}"
            ));
        }
        if self.max_running == Some(0) {
            return Err("max_running must be at least 1".into());
        }
        if self.run_as.as_deref().is_some_and(str::is_empty) {
            return Err("run_as must name a user".into());
        }
        Ok(())
    }

    /// `cpu_max` in thousandths of a core (1.5 cores: 1500).
    pub fn cpu_max_millis(&self) -> Option<u64> {
        self.cpu_max.map(|cores| (cores * 1000.0).round() as u64)
    }
}

/// Refuses a write root in `/proc` or `/sys` (reached through a symlink too): the kernel's own
/// files stay read-only under every policy, or a task could move itself out of its cgroups.
fn kernel_free(root: &Path) -> Result<(), String> {
    let real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    match ["/proc", "/sys"].into_iter().find(|k| real.starts_with(k)) {
        Some(kernel) => Err(format!(
            "write: {} lies in {kernel}, the kernel's own files, which stay read-only under every \
             policy (a task could otherwise leave its cgroups)",
            root.display()
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_root_named_through_a_symlink_is_taken_by_its_real_path() {
        let dir = std::env::temp_dir().join(format!("taskhost-policy-real-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("real")).expect("a directory of the test's");
        let linked = std::os::unix::fs::symlink(dir.join("real"), dir.join("link"));
        let mut table = PolicyTable {
            write: Some(vec![dir.join("link"), dir.join("absent")]),
            ..PolicyTable::default()
        };
        let settled = table.settle(Path::new("/"));
        let real = std::fs::canonicalize(dir.join("real"));
        std::fs::remove_dir_all(&dir).expect("removed");
        linked.expect("a symlink");
        assert_eq!(settled, Ok(()));
        let real = real.expect("the real path");
        assert_eq!(table.write, Some(vec![real, dir.join("absent")]));
    }

    #[test]
    fn a_write_root_in_the_kernels_own_files_is_refused_even_through_a_symlink() {
        let settle = |root: &Path| {
            let mut table = PolicyTable {
                write: Some(vec![root.to_owned()]),
                ..PolicyTable::default()
            };
            table.settle(Path::new("/"))
        };
        let dir = std::env::temp_dir().join(format!("taskhost-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory of the test's");
        let link = dir.join("cgroups");
        let linked = std::os::unix::fs::symlink("/sys/fs/cgroup", &link);
        let through_link = settle(&link);
        let plain = settle(&dir);
        std::fs::remove_dir_all(&dir).expect("removed");
        linked.expect("a symlink to /sys/fs/cgroup");
        assert!(settle(Path::new("/sys/fs/cgroup")).is_err_and(|e| e.contains("lies in /sys")));
        assert!(settle(Path::new("/proc/self")).is_err_and(|e| e.contains("lies in /proc")));
        assert!(through_link.is_err_and(|e| e.contains("lies in /sys")));
        assert_eq!(plain, Ok(()));
    }

    #[test]
    fn memory_sizes_read_as_binary_units_or_bytes() {
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("2X").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn cpu_max_in_cores_becomes_thousandths() {
        let table = PolicyTable {
            cpu_max: Some(1.5),
            ..PolicyTable::default()
        };
        assert_eq!(table.cpu_max_millis(), Some(1500));
    }
}

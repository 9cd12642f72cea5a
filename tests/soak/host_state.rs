//! The host's footprint as the kernel reports it: memory, threads and children of this process
//! (the host runs in the test's own process).

/// A line of `/proc/self/status`, in its unit (kB for memory).
pub fn status_field(name: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /proc/self/status"))
}

/// Children of this process that exist now (zombies included).
pub fn children() -> Vec<String> {
    children_of("self")
}

/// The children of process `pid` (`self` for this one), zombies included.
pub fn children_of(pid: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(c.split_whitespace().map(str::to_owned));
            }
        }
    }
    out
}

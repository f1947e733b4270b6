//! How much memory this machine (or the container the process runs in)
//! has available: the budget a scenario's estimated footprint is checked
//! against before it is built. The core only ever sees the number.

use std::fs;

/// Bytes available now: the kernel's `MemAvailable`, lowered to what the
/// cgroup's limit leaves and to what the process's own address-space limit
/// (`ulimit -v`) leaves, where either applies. None where nothing is known.
pub fn available_memory() -> Option<u64> {
    [meminfo_available(), cgroup_headroom(), address_space_headroom()].into_iter().flatten().min()
}

fn meminfo_available() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The cgroup's limit less its usage: v2 (`memory.max`, `memory.current`),
/// else v1 (`memory.limit_in_bytes`, `memory.usage_in_bytes`).
fn cgroup_headroom() -> Option<u64> {
    let read = |path: &str| fs::read_to_string(path).ok()?.trim().parse::<u64>().ok();
    let (limit, usage) = match read("/sys/fs/cgroup/memory.max") {
        Some(limit) => (limit, read("/sys/fs/cgroup/memory.current")?),
        None => {
            (read("/sys/fs/cgroup/memory/memory.limit_in_bytes")?, read("/sys/fs/cgroup/memory/memory.usage_in_bytes")?)
        }
    };
    Some(limit.saturating_sub(usage))
}

/// The address-space limit (`RLIMIT_AS`, soft) less the process's virtual
/// size now; None when it is unlimited. Past it every allocation fails,
/// however much memory the machine has.
fn address_space_headroom() -> Option<u64> {
    let limits = fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find_map(|l| l.strip_prefix("Max address space"))?;
    let limit: u64 = line.split_whitespace().next()?.parse().ok()?;
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let size = status.lines().find_map(|l| l.strip_prefix("VmSize:"))?;
    let kib: u64 = size.split_whitespace().next()?.parse().ok()?;
    Some(limit.saturating_sub(kib.saturating_mul(1024)))
}

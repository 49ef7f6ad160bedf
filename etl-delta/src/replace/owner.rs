//! The process a replace's stage belongs to, written in the stage's
//! `_etl_alive`, so that a later run on the same machine tells a killed
//! run's stage from a live one's at once instead of after the lease.
//!
//! A process is named by its kernel's boot id, its PID namespace, its PID
//! and its start time (`/proc/<pid>/stat`, field 22): a PID taken again by
//! another process has another start time, and a container's PIDs are of
//! another namespace. Where there is no `/proc` (not Linux), nothing is
//! known of the owner and only the lease tells.

use serde::{Deserialize, Serialize};

/// A process, as the kernel it runs on knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Owner {
    boot: String,
    pid_ns: String,
    pid: u32,
    start: u64,
}

impl Owner {
    /// This process; `None` where the kernel does not say.
    pub fn current() -> Option<Owner> {
        let pid = std::process::id();
        Some(Owner {
            boot: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()?
                .trim()
                .to_owned(),
            pid_ns: std::fs::read_link("/proc/self/ns/pid")
                .ok()?
                .to_string_lossy()
                .into_owned(),
            start: start_of(pid)?,
            pid,
        })
    }

    /// Whether this process is known to have ended, as the calling process
    /// sees it: it ran on the same boot of the same kernel, in the same PID
    /// namespace, and no process of its PID and start time runs now.
    /// `false` wherever that cannot be known (another machine, say).
    pub fn gone(&self) -> bool {
        let Some(here) = Owner::current() else {
            return false;
        };
        here.boot == self.boot
            && here.pid_ns == self.pid_ns
            && start_of(self.pid) != Some(self.start)
    }
}

/// When the process `pid` started (clock ticks after boot), if it runs.
fn start_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and
    // parentheses: the fields are counted from after its last `)`.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// A process of this machine that ran and ended (`None` where the kernel
/// does not say).
#[cfg(test)]
pub(crate) fn ended() -> Option<Owner> {
    let me = Owner::current()?;
    let mut child = std::process::Command::new("true").spawn().ok()?;
    let pid = child.id();
    let start = start_of(pid);
    child.wait().ok()?;
    Some(Owner {
        pid,
        start: start.unwrap_or(0),
        ..me
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_process_is_not_gone_and_an_ended_one_is() {
        let (Some(me), Some(ended)) = (Owner::current(), ended()) else {
            return; // No /proc here: nothing to tell.
        };
        assert!(!me.gone());
        assert!(ended.gone());
        // The same PID and start elsewhere (another boot): not known.
        let elsewhere = Owner {
            boot: "another boot".into(),
            ..ended
        };
        assert!(!elsewhere.gone());
    }
}

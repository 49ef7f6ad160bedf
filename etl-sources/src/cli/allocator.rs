//! The commands' use of the C allocator.
//!
//! glibc gives each thread that meets a locked arena an arena of its own,
//! up to eight per core, and each arena keeps the memory freed in it for
//! its next allocations. A run frees large buffers on every thread of the
//! runtime (a row group's columns as they are encoded, a page's records as
//! they are written), so the process's resident memory grows with the
//! largest buffers each arena ever held, not with what the run holds at
//! once. Two arenas keep that bounded at no measured cost in speed on a
//! run's two busiest threads (the worker writing a page, the one making
//! the next).

/// The arenas the commands let glibc make.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// Caps glibc's arenas at two, unless the user chose a number already
/// (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`):
/// a process-wide choice, so only the binaries make it, before their
/// runtime starts its threads. Elsewhere (musl, macOS, Windows) a no-op.
pub fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if user_chose_arenas(
            std::env::var_os("MALLOC_ARENA_MAX").is_some(),
            std::env::var("GLIBC_TUNABLES").ok().as_deref(),
        ) {
            return;
        }
        // SAFETY: mallopt only sets a parameter of the allocator, and is
        // called before the process has other threads.
        // A refusal (0) leaves glibc's default: nothing to report.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
}

/// Whether the environment already sets glibc's arena count.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn user_chose_arenas(env_var: bool, tunables: Option<&str>) -> bool {
    env_var || tunables.is_some_and(|t| t.contains("glibc.malloc.arena_max"))
}

#[cfg(test)]
mod tests {
    use super::user_chose_arenas;

    #[test]
    fn a_users_own_arena_count_is_kept() {
        assert!(user_chose_arenas(true, None));
        assert!(user_chose_arenas(
            false,
            Some("glibc.malloc.tcache_count=0:glibc.malloc.arena_max=4")
        ));
        assert!(!user_chose_arenas(
            false,
            Some("glibc.malloc.tcache_count=0")
        ));
        assert!(!user_chose_arenas(false, None));
    }
}

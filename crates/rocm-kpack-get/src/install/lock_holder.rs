//! Who holds a prefix's lock: the process `/proc/locks` names for the lock
//! file's inode, and its command, so a user told the prefix is busy knows
//! what to wait for or stop. `flock(2)` locks are not visible through
//! `fcntl(F_GETLK)`; `/proc/locks` lists them with the holder's pid.

use std::fmt;
use std::fs::File;
use std::os::unix::fs::MetadataExt;

/// A process holding a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`), when it can be read.
    pub command: Option<String>,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.command {
            Some(command) => write!(f, "pid {} ({command})", self.pid),
            None => write!(f, "pid {}", self.pid),
        }
    }
}

/// The process holding a lock on `file`, other than this one, if the
/// system says (`None` when `/proc/locks` cannot be read or names none).
pub(crate) fn holder_of(file: &File) -> Option<LockHolder> {
    let meta = file.metadata().ok()?;
    let locks = fs_err::read_to_string("/proc/locks").ok()?;
    let pid = holder_in(&locks, meta.dev(), meta.ino(), std::process::id())?;
    let command = fs_err::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty());
    Some(LockHolder { pid, command })
}

/// The pid of the first `/proc/locks` line (`1: FLOCK ADVISORY WRITE 123
/// 08:02:4567 0 EOF`) on the inode `ino` of device `dev`, not `this` pid.
fn holder_in(locks: &str, dev: u64, ino: u64, this: u32) -> Option<u32> {
    let wanted = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    locks.lines().find_map(|line| {
        let mut fields = line.split_whitespace().skip(1);
        // "->" marks a waiter blocked on the lock, not a holder.
        fields.next().filter(|kind| *kind != "->")?;
        let _advisory = fields.next()?;
        let _mode = fields.next()?;
        let pid: u32 = fields.next()?.parse().ok()?;
        (fields.next()? == wanted && pid != this).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_holder_of_an_inode_in_proc_locks() {
        let locks = "1: POSIX  ADVISORY  WRITE 700 00:1a:99 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4242 08:02:123456 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 5151 08:02:123456 0 EOF\n";
        let dev = libc::makedev(8, 2);
        assert_eq!(holder_in(locks, dev, 123456, 1), Some(4242));
        assert_eq!(holder_in(locks, dev, 123456, 4242), None);
        assert_eq!(holder_in(locks, dev, 999, 1), None);
        assert_eq!(holder_in("", dev, 123456, 1), None);
    }
}

//! A terminal that hangs up, as a dropped SSH session does: for the tests
//! of what `migrate` and `sync` do when theirs goes away.

use std::process::Command;

/// A pseudo-terminal whose slave is a child's controlling terminal, the
/// way an SSH session's is; dropping the [`Pty`] closes the master, which
/// hangs the terminal up as a dropped session does.
pub struct Pty {
    master: std::os::fd::OwnedFd,
    slave: std::path::PathBuf,
}

impl Pty {
    pub fn open() -> Pty {
        use std::os::fd::FromRawFd;
        // SAFETY: plain libc calls on a descriptor this test owns.
        unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(fd >= 0, "posix_openpt");
            assert_eq!(libc::grantpt(fd), 0);
            assert_eq!(libc::unlockpt(fd), 0);
            let mut name = [0 as libc::c_char; 64];
            assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
            let slave = std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned();
            Pty {
                master: std::os::fd::OwnedFd::from_raw_fd(fd),
                slave: slave.into(),
            }
        }
    }

    /// `command` with the terminal as its stdin, stdout, stderr and
    /// controlling terminal, in a session of its own (it is the session
    /// leader, which the kernel sends SIGHUP when the terminal hangs up).
    pub fn attach(&self, command: &mut Command) {
        use std::os::unix::process::CommandExt;
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.slave)
                .unwrap()
        };
        command.stdin(open()).stdout(open()).stderr(open());
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Reads what the terminal shows until `stop` is set (the child must
    /// not block on a full terminal before it reaches its fail point).
    pub fn drain(
        &self,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<Vec<u8>> {
        use std::os::fd::AsRawFd;
        let fd = self.master.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let mut poll = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd, a buffer of its stated length.
                let ready = unsafe { libc::poll(&mut poll, 1, 100) };
                if ready > 0 {
                    let n =
                        unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                    if n <= 0 {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n as usize]);
                }
            }
            seen
        })
    }
}

/// Waits until `child` is stopped (state `T`: held at a `:stop` fail
/// point), at most 30 s; false when it never was.
pub fn held(child: &std::process::Child) -> bool {
    let stat = format!("/proc/{}/stat", child.id());
    (0..600).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let state = std::fs::read_to_string(&stat).unwrap_or_default();
        state
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('T'))
    })
}

/// Waits for `child` to end, at most `seconds`.
pub fn ended_within(child: &mut std::process::Child, seconds: u64) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "it did not end within {seconds} s of the hang-up"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

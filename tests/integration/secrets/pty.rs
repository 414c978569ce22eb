//! A pseudo-terminal driver (libc: posix_openpt), for the prompts of a first run.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(90);

/// A child process on the slave side of a fresh pty; we hold the master.
pub struct Pty {
    master: File,
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
    /// Position in the ANSI-stripped output up to which prompts were consumed.
    cursor: usize,
}

fn check(rc: i32, what: &str) {
    assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
}

impl Pty {
    pub fn spawn(mut cmd: Command) -> Pty {
        let (master, slave) = unsafe {
            let m = libc::open(
                c"/dev/ptmx".as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            check(m, "open /dev/ptmx");
            check(libc::grantpt(m), "grantpt");
            check(libc::unlockpt(m), "unlockpt");
            let mut name = [0 as libc::c_char; 256];
            assert_eq!(
                libc::ptsname_r(m, name.as_mut_ptr(), name.len()),
                0,
                "ptsname_r"
            );
            let s = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            check(s, "open the pty slave");
            let size = libc::winsize {
                ws_row: 50,
                ws_col: 250,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            check(libc::ioctl(m, libc::TIOCSWINSZ, &size), "TIOCSWINSZ");
            (File::from_raw_fd(m), OwnedFd::from_raw_fd(s))
        };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        unsafe {
            cmd.pre_exec(|| {
                // A new session whose controlling terminal is the pty (/dev/tty).
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn strata on a pty");
        // The Command holds copies of the slave: close them, so that reading the
        // master ends (EIO) when the child's side is closed.
        drop(cmd);
        let out = Arc::new(Mutex::new(Vec::new()));
        let mut reader_file = master.try_clone().unwrap();
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader_file.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
        });
        Pty {
            master,
            child,
            out,
            reader: Some(reader),
            cursor: 0,
        }
    }

    /// Everything the child wrote to the terminal so far.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    pub fn text(&self) -> String {
        strip_ansi(&self.raw())
    }

    /// Waits until `needle` appears after the cursor; returns the text from the
    /// cursor to the end of the match, and moves the cursor past it.
    pub fn expect(&mut self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let text = self.text();
            if let Some(at) = text.get(self.cursor..).and_then(|t| t.find(needle)) {
                let end = self.cursor + at + needle.len();
                let seen = text[self.cursor..end].to_string();
                self.cursor = end;
                return seen;
            }
            if start.elapsed() > TIMEOUT {
                panic!("timed out waiting for {needle:?} on the terminal; it shows:\n{text}");
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                let text = self.text();
                if !text[self.cursor.min(text.len())..].contains(needle) {
                    panic!(
                        "strata exited ({status}) before showing {needle:?}; the terminal shows:\n{text}"
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn lflag(&self) -> libc::tcflag_t {
        // On Linux, termios ioctls on the master act on the slave's settings.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        check(
            unsafe { libc::tcgetattr(self.master.as_raw_fd(), &mut t) },
            "tcgetattr",
        );
        t.c_lflag
    }

    fn wait_mode(&self, what: &str, ok: impl Fn(libc::tcflag_t) -> bool) {
        let start = Instant::now();
        while !ok(self.lflag()) {
            if start.elapsed() > TIMEOUT {
                panic!(
                    "timed out waiting for the terminal to be {what}; it shows:\n{}",
                    self.text()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Types a line at a dialoguer text prompt: once the child reads keys in raw
    /// mode (no kernel echo), the text and Enter.
    pub fn type_line(&mut self, text: &str) {
        self.wait_mode("in raw mode (reading keys)", |l| l & libc::ICANON == 0);
        std::thread::sleep(Duration::from_millis(30));
        self.wait_mode("in raw mode (reading keys)", |l| l & libc::ICANON == 0);
        self.master
            .write_all(format!("{text}\r").as_bytes())
            .unwrap();
        self.master.flush().unwrap();
    }

    /// Types at a no-echo prompt: once the terminal reads a line with echo off.
    pub fn type_secret(&mut self, text: &str) {
        self.wait_mode("reading a line without echo", |l| {
            l & libc::ECHO == 0 && l & libc::ICANON != 0
        });
        self.master
            .write_all(format!("{text}\r").as_bytes())
            .unwrap();
        self.master.flush().unwrap();
    }

    /// Waits for the child to exit; returns its exit code and everything it showed.
    pub fn wait(mut self) -> (i32, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > TIMEOUT {
                let _ = self.child.kill();
                panic!("strata did not exit; the terminal shows:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader ends when the last holder of the slave closes it.
        if let Some(reader) = self.reader.take() {
            let until = Instant::now() + Duration::from_secs(10);
            while !reader.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
        (status.code().unwrap_or(-1), self.raw())
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Removes ANSI escape sequences (CSI and two-byte escapes) from terminal output.
pub(super) fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    // OSC: up to BEL or ST.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

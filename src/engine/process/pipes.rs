//! A child's stdout and stderr, read on the caller's thread with poll(2) and cut into
//! lines as they come.

use std::cell::RefCell;
use std::io::Read;
use std::os::fd::AsRawFd;

use super::Stream;

const CHUNK_BYTES: usize = 64 * 1024;

thread_local! {
    /// Where a thread reads its children's pipes: zeroed once a thread, not once a child
    /// (64 KiB cleared for every project was 7% of a run's instructions).
    static CHUNK: RefCell<Vec<u8>> = RefCell::new(vec![0u8; CHUNK_BYTES]);
}

/// Runs `f` with this thread's read buffer (a new one if it is already lent out).
fn with_chunk<T>(f: impl FnOnce(&mut [u8]) -> T) -> T {
    CHUNK.with(|c| match c.try_borrow_mut() {
        Ok(mut chunk) => f(&mut chunk),
        Err(_) => f(&mut vec![0u8; CHUNK_BYTES]),
    })
}

/// One pipe of a child being read: what it sent that is not a whole line yet.
struct Pipe {
    reader: os_pipe::PipeReader,
    from: Stream,
    partial: Vec<u8>,
    open: bool,
}

impl Pipe {
    fn new(reader: os_pipe::PipeReader, from: Stream) -> Pipe {
        Pipe {
            reader,
            from,
            partial: Vec::new(),
            open: true,
        }
    }

    fn emit(&mut self, on_line: &mut dyn FnMut(Stream, String), all: bool) {
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.partial.drain(..=i).collect();
            while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                line.pop();
            }
            on_line(self.from, String::from_utf8_lossy(&line).into_owned());
        }
        if all && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            on_line(self.from, String::from_utf8_lossy(&line).into_owned());
        }
    }

    /// Reads what is ready: its whole lines go to `on_line`; at its end (or an error)
    /// the pipe is closed and its last partial line goes too.
    fn read_ready(&mut self, chunk: &mut [u8], on_line: &mut dyn FnMut(Stream, String)) {
        match (&self.reader).read(chunk) {
            Ok(0) => {
                self.open = false;
                self.emit(on_line, true);
            }
            Ok(k) => {
                self.partial.extend_from_slice(&chunk[..k]);
                self.emit(on_line, false);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                self.open = false;
                self.emit(on_line, true);
            }
        }
    }
}

/// A child's two pipes, stdout then stderr.
pub(super) struct Pipes {
    pipes: [Pipe; 2],
}

impl Pipes {
    pub(super) fn new(stdout: os_pipe::PipeReader, stderr: os_pipe::PipeReader) -> Pipes {
        Pipes {
            pipes: [
                Pipe::new(stdout, Stream::Stdout),
                Pipe::new(stderr, Stream::Stderr),
            ],
        }
    }

    /// Whether a pipe is still open (its writers may send more).
    pub(super) fn any_open(&self) -> bool {
        self.pipes.iter().any(|p| p.open)
    }

    /// Waits up to 50 ms for output and reads what came, its whole lines to `on_line`;
    /// `false` when nothing came in that time.
    pub(super) fn pump(
        &mut self,
        on_line: &mut dyn FnMut(Stream, String),
    ) -> std::io::Result<bool> {
        let mut fds: Vec<libc::pollfd> = self
            .pipes
            .iter()
            .filter(|p| p.open)
            .map(|p| libc::pollfd {
                fd: p.reader.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else if n == 0 {
            return Ok(false);
        }
        for fd in fds.iter().filter(|f| f.revents != 0) {
            if let Some(p) = self
                .pipes
                .iter_mut()
                .find(|p| p.reader.as_raw_fd() == fd.fd)
            {
                with_chunk(|chunk| p.read_ready(chunk, on_line));
            }
        }
        Ok(true)
    }

    /// The child is done: the partial lines go to `on_line`, and a pipe a background
    /// process the child left still holds is drained on a detached thread, so its writes
    /// do not fail with EPIPE (or kill it with SIGPIPE).
    pub(super) fn finish(self, on_line: &mut dyn FnMut(Stream, String)) {
        let Pipes { mut pipes } = self;
        for p in &mut pipes {
            p.emit(on_line, true);
        }
        for p in pipes.into_iter().filter(|p| p.open) {
            std::thread::spawn(move || {
                let mut sink = [0u8; 8192];
                while matches!((&p.reader).read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    }
}

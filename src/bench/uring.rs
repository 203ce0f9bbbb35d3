//! The io_uring engine: one thread keeps `queue_depth` I/Os in flight.
//!
//! The `io-uring` crate ships kernel bindings for 64-bit targets only; on
//! others (armhf) this engine reports itself unavailable and the thread
//! engine runs instead.

#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "powerpc64"
))]
mod imp {
    use crate::bench::buffer::AlignedBuf;
    use crate::bench::job::{Direction, Measurement, OffsetPicker};
    use crate::bench::measure::{io_buffers, Gate, JobContext, Progress, Tally, Throttle};
    use crate::bench::random::{stamp_for_write, FastRng};
    use anyhow::{anyhow, Context, Result};
    use io_uring::{opcode, squeue, types, EnterFlags, IoUring, Probe};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    /// `Ok` when this kernel lets us set up a ring with read and write.
    pub fn available() -> Result<()> {
        let ring = IoUring::new(2).map_err(|e| anyhow!("io_uring_setup failed ({e})"))?;
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| anyhow!("probing io_uring failed ({e})"))?;
        anyhow::ensure!(
            probe.is_supported(opcode::Read::CODE) && probe.is_supported(opcode::Write::CODE),
            "the kernel's io_uring lacks plain read/write (Linux 5.6 or later has them)"
        );
        Ok(())
    }

    /// A ring set up as fio's io_uring engine sets up its own (fio 3.33+,
    /// seen with strace): a completion queue no larger than the depth, and
    /// completion work deferred to this one thread until it asks for
    /// events, instead of interrupting it whenever an I/O completes. How
    /// and when completions are handled shapes the latency tail at queue
    /// depth 32; doing it as fio does is what makes the two comparable.
    /// Older kernels refuse the newer flags (DEFER_TASKRUN needs 6.1,
    /// COOP_TASKRUN 5.19), so they are dropped one step at a time, as fio
    /// does.
    fn new_ring(entries: u32) -> std::io::Result<IoUring> {
        let full = IoUring::builder()
            .setup_cqsize(entries)
            .setup_coop_taskrun()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries);
        match full {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            other => return other,
        }
        match IoUring::builder()
            .setup_cqsize(entries)
            .setup_coop_taskrun()
            .build(entries)
        {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
            other => other,
        }
    }

    /// Submits what is queued and, as fio does on every submission, lets
    /// the kernel post the completions it has deferred (GETEVENTS without
    /// waiting for any).
    fn submit_one(ring: &mut IoUring) -> std::io::Result<usize> {
        let queued = u32::try_from(ring.submission().len()).unwrap_or(u32::MAX);
        // SAFETY: no argument is passed; every queued entry points at a
        // buffer that outlives its I/O (see `run`).
        unsafe {
            ring.submitter()
                .enter::<libc::sigset_t>(queued, 0, EnterFlags::GETEVENTS.bits(), None)
        }
    }

    pub fn run(ctx: &JobContext<'_>, progress: &mut dyn FnMut(Progress)) -> Result<Measurement> {
        let spec = ctx.spec;
        let depth = spec.queue_depth.max(1) as usize;
        let ring = new_ring(spec.queue_depth.max(1).next_power_of_two())
            .context("setting up io_uring for the benchmark")?;
        let mut rng = FastRng::from_entropy();
        let buffers = io_buffers(ctx, depth, &mut rng);
        let mut picker = OffsetPicker::new(spec, rng.next_u64());
        let started = Instant::now();
        let measured_from = started + spec.ramp;
        let gate = Gate::new(spec, measured_from, ctx.interrupted);
        let mut tally = Tally::new(spec, measured_from);
        let mut throttle = Throttle::new(started);
        let mut queue = Queue {
            ring,
            fd: types::Fd(ctx.file.as_raw_fd()),
            direction: spec.direction,
            length: spec.block_size,
            buffers,
            issued_at: vec![started; depth],
            free: (0..depth).rev().collect(),
            completed: Vec::with_capacity(depth),
            in_flight: 0,
        };
        let mut failure: Option<anyhow::Error> = None;

        loop {
            if failure.is_none() {
                queue.fill(&mut picker, &gate, Instant::now());
            }
            if queue.in_flight == 0 {
                break;
            }
            match queue.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // The kernel may still own buffers: leak them rather
                    // than free memory a pending I/O could write into.
                    std::mem::forget(std::mem::take(&mut queue.buffers));
                    return Err(anyhow!("io_uring_enter failed during {}: {e}", spec.name));
                }
            }
            let now = Instant::now();
            queue.reap(&spec.name, now, &mut tally, &mut failure);
            if let Some(elapsed) = throttle.due(now) {
                progress(Progress {
                    elapsed,
                    ios: tally.ios,
                    bytes: tally.bytes,
                });
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
        Ok(tally.into_measurement(gate.interrupted()))
    }

    /// One job's ring and the I/Os it keeps in flight: a slot for each of
    /// `queue_depth` I/Os, with its buffer and when it was issued.
    struct Queue {
        ring: IoUring,
        fd: types::Fd,
        direction: Direction,
        length: u32,
        buffers: Vec<AlignedBuf>,
        issued_at: Vec<Instant>,
        /// The slots not in flight, the next to use last.
        free: Vec<usize>,
        /// The completions of one wait, as (slot, result).
        completed: Vec<(u64, i32)>,
        in_flight: usize,
    }

    impl Queue {
        /// Issues an I/O in each free slot while `gate` lets one start at
        /// `now`, each handed to the kernel at once.
        fn fill(&mut self, picker: &mut OffsetPicker, gate: &Gate<'_>, now: Instant) {
            while let Some(&slot) = self.free.last() {
                if !gate.may_issue(now) {
                    break;
                }
                self.free.pop();
                // Latency runs from here, before the I/O is prepared and
                // submitted, as fio's `lat` (from its io_u's start time): a
                // stamp shared by a whole refill would date the last I/Os
                // of a burst of 32 by the submissions ahead of them.
                self.issued_at[slot] = Instant::now();
                let offset = picker.next_offset();
                let buf = &mut self.buffers[slot];
                let entry = io_entry(self.direction, self.fd, buf, offset, self.length);
                // SAFETY: the buffer lives in `buffers` until every I/O has
                // completed (`run` drains before returning), and is not
                // touched while its slot is in flight.
                if unsafe { self.ring.submission().push(&entry.user_data(slot as u64)) }.is_err() {
                    self.free.push(slot);
                    break;
                }
                self.in_flight += 1;
                // Hand each I/O to the kernel at once, as fio does by
                // default (iodepth_batch=1): batching the refills of a
                // whole completion burst leaves the device idle meanwhile
                // and costs about a tenth of the IOPS at queue depth 32.
                // An error here shows again at the wait in `run`.
                let _ = submit_one(&mut self.ring);
            }
        }

        /// Frees the slots of the I/Os that completed by `now`, each
        /// counted into `tally`, or its error kept in `failure` (the first
        /// one only).
        fn reap(
            &mut self,
            job: &str,
            now: Instant,
            tally: &mut Tally,
            failure: &mut Option<anyhow::Error>,
        ) {
            self.completed.clear();
            self.completed.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data(), cqe.result())),
            );
            for &(slot, result) in &self.completed {
                let slot = slot as usize;
                self.in_flight -= 1;
                self.free.push(slot);
                match completion_error(job, result, self.length) {
                    Some(error) => {
                        failure.get_or_insert(error);
                    }
                    None => tally.complete(self.issued_at[slot], now),
                }
            }
        }
    }

    /// The submission for one I/O of `length` bytes at `offset` from `buf`
    /// (a write's buffer stamped first, so no two blocks are alike).
    fn io_entry(
        direction: Direction,
        fd: types::Fd,
        buf: &mut AlignedBuf,
        offset: u64,
        length: u32,
    ) -> squeue::Entry {
        match direction {
            Direction::Read => opcode::Read::new(fd, buf.as_mut_ptr(), length)
                .offset(offset)
                .build(),
            Direction::Write => {
                stamp_for_write(buf.as_mut_slice(), offset);
                opcode::Write::new(fd, buf.as_ptr(), length)
                    .offset(offset)
                    .build()
            }
        }
    }

    /// Why a completion failed: the kernel's error, or fewer bytes than
    /// asked for.
    fn completion_error(job: &str, result: i32, length: u32) -> Option<anyhow::Error> {
        if result < 0 {
            Some(anyhow!(
                "{job} failed: {}",
                std::io::Error::from_raw_os_error(-result)
            ))
        } else if result as u32 != length {
            Some(anyhow!(
                "{job}: short transfer ({result} of {length} bytes)"
            ))
        } else {
            None
        }
    }
}

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "powerpc64"
)))]
mod imp {
    use crate::bench::job::Measurement;
    use crate::bench::measure::{JobContext, Progress};
    use anyhow::{bail, Result};

    pub fn available() -> Result<()> {
        bail!("io_uring support is not built for this architecture")
    }

    pub fn run(_ctx: &JobContext<'_>, _progress: &mut dyn FnMut(Progress)) -> Result<Measurement> {
        bail!("io_uring support is not built for this architecture; use --engine threads")
    }
}

pub use imp::{available, run};

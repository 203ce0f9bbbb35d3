//! The fallback engine: `queue_depth` threads, each with one synchronous
//! pread/pwrite in flight. The device sees the same number of outstanding
//! requests as with io_uring, at the cost of a thread switch per I/O.

use super::job::{Direction, JobSpec, Measurement, OffsetPicker, Pattern};
use super::measure::{io_buffers, Gate, JobContext, Progress, Tally, Throttle};
use super::random::{stamp_for_write, FastRng};
use anyhow::{anyhow, bail, Result};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

pub fn run(ctx: &JobContext<'_>, progress: &mut dyn FnMut(Progress)) -> Result<Measurement> {
    let spec = ctx.spec;
    let depth = spec.queue_depth.max(1) as usize;
    let mut seed_rng = FastRng::from_entropy();
    let buffers = io_buffers(ctx, depth, &mut seed_rng);
    // The clock starts once every thread is up: starting 32 threads can
    // take longer than a short test's ramp on a slow or busy machine (it
    // did under qemu-user), and a test timed from before then measured
    // no I/O at all.
    let ready = Barrier::new(depth + 1);
    let go = Barrier::new(depth + 1);
    let clock: OnceLock<(Instant, Gate<'_>)> = OnceLock::new();
    // Sequential jobs share one position so the threads together read or
    // write the span in order, as one queue of depth N would.
    let next_block = AtomicU64::new(0);
    let blocks = spec.blocks_in_span().max(1);
    let completed_ios = AtomicU64::new(0);
    let running = AtomicU64::new(depth as u64);

    let results: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let workers: Vec<_> = buffers
            .into_iter()
            .map(|mut buf| {
                let seed = seed_rng.next_u64();
                let (ready, go, clock, next_block, completed_ios, running) =
                    (&ready, &go, &clock, &next_block, &completed_ios, &running);
                scope.spawn(move || {
                    ready.wait();
                    go.wait();
                    let (measured_from, gate) = clock.get().expect("the clock is set before go");
                    let outcome = worker(
                        ctx,
                        &mut buf,
                        seed,
                        gate,
                        *measured_from,
                        |picker| next_offset(spec, picker, next_block, blocks),
                        completed_ios,
                    );
                    running.fetch_sub(1, Ordering::Relaxed);
                    outcome
                })
            })
            .collect();
        ready.wait();
        let started = Instant::now();
        let measured_from = started + spec.ramp;
        let _ = clock.set((
            measured_from,
            Gate::new(spec, measured_from, ctx.interrupted),
        ));
        go.wait();
        watch(spec, started, &running, &completed_ios, progress);
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(anyhow!("a benchmark thread panicked")))
            })
            .collect()
    });

    let (measured_from, gate) = clock.into_inner().expect("the clock was set");
    let mut total = Tally::new(spec, measured_from);
    for result in results {
        total.merge(result?);
    }
    Ok(total.into_measurement(gate.interrupted()))
}

/// Where a thread's next I/O goes: a sequential job's next block of
/// the span, shared by its threads (`next_block` of `blocks`), or a
/// random job's own pick.
fn next_offset(
    spec: &JobSpec,
    picker: &mut OffsetPicker,
    next_block: &AtomicU64,
    blocks: u64,
) -> u64 {
    match spec.pattern {
        Pattern::Sequential => {
            (next_block.fetch_add(1, Ordering::Relaxed) % blocks) * u64::from(spec.block_size)
        }
        Pattern::Random => picker.next_offset(),
    }
}

/// Reports the I/Os completed after the ramp, at most ten times a second,
/// until no thread is `running`.
fn watch(
    spec: &JobSpec,
    started: Instant,
    running: &AtomicU64,
    completed_ios: &AtomicU64,
    progress: &mut dyn FnMut(Progress),
) {
    let mut throttle = Throttle::new(started);
    while running.load(Ordering::Relaxed) > 0 {
        std::thread::sleep(Duration::from_millis(20));
        if let Some(elapsed) = throttle.due(Instant::now()) {
            let ios = completed_ios.load(Ordering::Relaxed);
            progress(Progress {
                elapsed,
                ios,
                bytes: ios * u64::from(spec.block_size),
            });
        }
    }
}

fn worker(
    ctx: &JobContext<'_>,
    buf: &mut super::buffer::AlignedBuf,
    seed: u64,
    gate: &Gate<'_>,
    measured_from: Instant,
    mut next_offset: impl FnMut(&mut OffsetPicker) -> u64,
    completed_ios: &AtomicU64,
) -> Result<Tally> {
    let spec = ctx.spec;
    let mut rng = FastRng::new(seed);
    let mut picker = OffsetPicker::new(spec, rng.next_u64());
    let mut tally = Tally::new(spec, measured_from);
    let length = buf.len();
    loop {
        let issued = Instant::now();
        if !gate.may_issue(issued) {
            break;
        }
        let offset = next_offset(&mut picker);
        let done = match spec.direction {
            Direction::Read => ctx.file.read_at(buf.as_mut_slice(), offset),
            Direction::Write => {
                stamp_for_write(buf.as_mut_slice(), offset);
                ctx.file.write_at(buf.as_slice(), offset)
            }
        };
        let now = Instant::now();
        match done {
            Ok(n) if n == length => {}
            Ok(n) => bail!("{}: short transfer ({n} of {length} bytes)", spec.name),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => bail!("{} failed at offset {offset}: {e}", spec.name),
        }
        tally.complete(issued, now);
        if now >= measured_from {
            completed_ios.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(tally)
}
